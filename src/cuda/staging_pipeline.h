// The pinned staging path: storage --ReadAt--> pinned slot
// --cudaMemcpyAsync--> device.
//
// A ring of pinned slots is allocated once per loader and split evenly over
// the worker threads; each worker reads a chunk into its next free slot,
// enqueues the copies on its stream and records the slot's event, so reads of
// later chunks overlap the copies of earlier ones. A slot is reused only after
// its event completed; every slot is idle again when Run returns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "cuda/cuda_util.h"
#include "cuda/load_job.h"
#include "env/file.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"

namespace weightlift::internal {

class StagingPipeline {
 public:
  // RING holds SLOT_EVENTS.size() slots of SLOT_BYTES (a multiple of 4096),
  // SLOTS_PER_THREAD consecutive ones per worker.
  StagingPipeline(PinnedBuffer ring, CudaEvents slot_events,
                  int slots_per_thread, size_t slot_bytes)
      : ring_(std::move(ring)),
        events_(std::move(slot_events)),
        slots_per_thread_(slots_per_thread),
        slot_bytes_(slot_bytes) {}

  uint64_t ring_bytes() const { return ring_.size(); }
  // The pinned ring's memory (io_uring registers it for its reads).
  std::span<std::byte> ring() const { return {ring_.data(), ring_.size()}; }

  // Runs PLAN (chunks of at most slot_bytes, aligned for FILES[c.file]) on
  // min(pool.size(), chunks) workers; worker w copies on
  // STREAMS[w % STREAMS.size()]. Errors go to job.Fail.
  void Run(Job& job, const Plan& plan, std::span<File* const> files,
           std::span<const cudaStream_t> streams, int device, ThreadPool& pool);

 private:
  void Worker(int w, Job& job, const Plan& plan, std::span<File* const> files,
              cudaStream_t stream, int device, std::atomic<size_t>& next);

  PinnedBuffer ring_;
  CudaEvents events_;  // one per slot
  int slots_per_thread_;
  size_t slot_bytes_;
};

}  // namespace weightlift::internal
