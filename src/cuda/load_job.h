// One CUDA load in flight: the request, where each tensor goes on the
// device, per-tensor completion counters and the first error. Shared by the
// three transfer paths; each path calls Delivered once per piece whose bytes
// are on the device, and Fail on its first error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "plan/plan.h"
#include "plan/selection.h"
#include "util/progress.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct Job {
  // Sets every field below: SELECTIONS[r] is what request r selects (a
  // whole tensor or a slice), DST[r] its device address (the selection's
  // bytes back to back), TOTAL the bytes the load delivers (for
  // on_progress). CKPT and CALLBACKS must outlive the job.
  Job(const Checkpoint& ckpt, std::vector<TensorSelection> selections,
      std::vector<uintptr_t> dst, const LoadCallbacks& callbacks,
      uint64_t total);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const Checkpoint* ckpt = nullptr;
  std::vector<TensorSelection> selections;  // request index -> selection
  std::vector<uint32_t> tensors;  // request index -> ckpt tensor index
  std::vector<uintptr_t> dst;     // request index -> device address
  const LoadCallbacks* callbacks = nullptr;
  std::unique_ptr<std::atomic<uint32_t>[]> remaining;  // pieces outstanding
  std::atomic<bool> failed{false};
  uint64_t total = 0;
  // Bytes on the device so far, and the on_progress calls (ordered, never
  // concurrent); the loader calls progress.Finish() once the load is done.
  ProgressReporter progress;

  // Records S if it is the first error; every path stops taking work once
  // failed is set. Thread-safe.
  void Fail(Status s);
  // The first error (OK when none).
  Status first_error() const;
  // LEN bytes of request tensor R are on the device: counts progress and
  // fires on_ready when that was the tensor's last outstanding piece.
  void Delivered(uint32_t r, uint64_t len);
  // Every scatter of CHUNK is on the device.
  void DeliveredChunk(const ReadChunk& chunk);
  // Fires on_ready for R unless the load has failed.
  void ReadyNow(uint32_t r);

 private:
  mutable std::mutex mu_;
  Status first_error_;
};

}  // namespace weightlift::internal
