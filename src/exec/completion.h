// Completion of one load, whatever sinks deliver its bytes: per-tensor
// piece counters (on_ready fires once per tensor, from the thread that
// delivered its last piece), progress, and the first error.
//
// Every sink reports through one of these: a host sink when its memcpy or
// read finished, a CUDA sink when the event of a slot's copies completed.
// The counters come from the plans (Plan::pieces_per_tensor), so a load that
// runs several plans (one per sink) adds each before any runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "plan/plan.h"
#include "util/progress.h"
#include "weightlift/status.h"

namespace weightlift::internal {

class CompletionTracker {
 public:
  // TENSORS: the request tensors of the load (Segment::tensor numbers).
  // ON_READY(t): tensor t has all its bytes in place; never called once the
  // load has failed. ON_PROGRESS: see ProgressReporter (TOTAL bytes). Either
  // may be empty; both must outlive the tracker.
  CompletionTracker(size_t tensors, std::function<void(uint32_t)> on_ready,
                    ProgressReporter::Callback on_progress, uint64_t total);
  CompletionTracker(const CompletionTracker&) = delete;
  CompletionTracker& operator=(const CompletionTracker&) = delete;

  // PLAN's pieces will be delivered too. REQUIRES: before Start, the plan
  // made for this load's tensors.
  void AddPieces(const Plan& plan);
  // Fires on_ready for every tensor with no pieces (empty tensors). Call
  // once, after every AddPieces and before the first delivery.
  void Start();

  // Every scatter of CHUNK is in place. Thread-safe.
  void Delivered(const ReadChunk& chunk) {
    uint64_t bytes = 0;
    for (const Scatter& s : chunk.scatters) {
      bytes += s.bytes();
      Piece(s.tensor);
    }
    progress_.Add(bytes);
  }

  // Records S if it is the first error; every run stops taking chunks once
  // failed() is set. Thread-safe.
  void Fail(Status s);
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // The first error (OK when none).
  Status first_error() const;

  // The load succeeded: the final progress call.
  void Finish() { progress_.Finish(); }
  uint64_t delivered() const { return progress_.delivered(); }

 private:
  void Piece(uint32_t tensor) {
    if (remaining_[tensor].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      Ready(tensor);
    }
  }
  void Ready(uint32_t tensor) {
    if (on_ready_ && !failed()) on_ready_(tensor);
  }

  const size_t tensors_;
  std::unique_ptr<std::atomic<uint32_t>[]> remaining_;
  std::function<void(uint32_t)> on_ready_;
  ProgressReporter progress_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  Status first_error_;  // guarded by mu_
};

}  // namespace weightlift::internal
