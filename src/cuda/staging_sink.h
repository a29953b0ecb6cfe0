// StagingSink: cuda:N through pinned staging. storage --read--> pinned slot
// --cudaMemcpyAsync--> device.
//
// A ring of pinned slots is reserved once per loader and split evenly over
// the worker threads; a worker's chunk is read into its next slot, the
// copies are enqueued on the worker's stream and the slot's event recorded,
// so reads of later chunks overlap the copies of earlier ones. A slot is
// reused only after its event completed, and its chunk is then reported
// delivered; every slot is idle again after Drain.
//
// Pinning (touch + cudaHostRegister, PinnedBuffer::PinPart) is per slot, by
// the slot's own worker thread: slot 0 as soon as the thread starts
// (PinEarly, at loader creation, overlapping what the caller does before
// the first load), the others when first taken, each while the worker's
// earlier copies run. On the H200 the driver ran 16 registrations of 8 MiB
// one after another (~0.7 ms each): pinning whole worker parts at a
// worker's start held the last worker's first copy back ~11 ms.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <vector>

#include "cuda/cuda_util.h"
#include "exec/sink.h"

namespace weightlift::internal {

class StagingSink final : public Sink {
 public:
  // RING holds SLOT_EVENTS.size() slots of SLOT_BYTES (a multiple of 4096),
  // SLOTS_PER_THREAD consecutive ones per worker (so slot_events.size() /
  // slots_per_thread workers), reserved in one part per slot (slot k of
  // worker w is part w * slots_per_thread + k). Worker w copies on STREAMS[w %
  // STREAMS.size()] (not owned; they must outlive the sink's use) to
  // DEVICE.
  StagingSink(PinnedBuffer ring, CudaEvents slot_events, int slots_per_thread,
              size_t slot_bytes, std::vector<cudaStream_t> streams, int device);

  uint64_t ring_bytes() const { return ring_.size(); }
  // The pinned ring's memory (io_uring registers it for its reads).
  std::span<std::byte> ring() const { return {ring_.data(), ring_.size()}; }

  // Seconds each worker's part of the ring took to pin (touch +
  // cudaHostRegister) in the loads since the last call; 0 where nothing
  // was pinned. Between loads only.
  std::vector<double> TakePinSeconds() { return ring_.TakePinSeconds(); }

  uint64_t slot_bytes() const override { return slot_bytes_; }
  Status BeginWorker(int worker) override;
  // Pins worker W's first slot now, on W's thread (before its first
  // load); a failure is left for AcquireSlot to meet again and report.
  void PinEarly(int w);
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override;
  void Abandon(int, SinkSlot) override {}  // the slot holds no copies
  void Drain(int worker, CompletionTracker& done) override;

 private:
  struct Slot {
    std::byte* buf = nullptr;
    cudaEvent_t ev = nullptr;
    const ReadChunk* chunk = nullptr;  // copies in flight; null when idle
  };
  struct Worker {
    std::vector<Slot> slots;
    int next = 0;  // the slot the next chunk takes
    cudaStream_t stream = nullptr;
  };

  int Part(int w, int slot) const {
    return w * static_cast<int>(workers_[w].slots.size()) + slot;
  }

  PinnedBuffer ring_;
  CudaEvents events_;  // one per slot
  size_t slot_bytes_;
  int device_;
  std::vector<Worker> workers_;  // made once; each used by one thread
};

}  // namespace weightlift::internal
