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
// Pinning, in waves. The ring is laid out slot-major: wave k is slot k of
// every worker, one contiguous part of the ring, pinned with one
// cudaHostRegister. Each worker touches (first-writes) its own slot of
// every wave, in parallel with the others, as soon as its thread starts
// (PinEarly, at loader creation). The thread whose touch completes a wave
// registers it, so both registrations happen while the caller opens the
// checkpoint and the first reads begin, not in the middle of the first
// load (session 9, call D: with wave 1 registered during the first load,
// that load's transfer took 5.5-10 ms longer than the later calls'; with
// every wave registered at creation, 2 ms or less;
// bench/results/2026-12-03-h200-session9/README.md). A worker's first copy out
// of a slot waits for its wave; a worker that finds a wave's slots untouched
// touches them itself, so no wave waits on a worker with nothing to do.
// A registration holds up every cudaMemcpyAsync of the process until it
// returns (session 13, probes/register_vs_copy.cu: a 4 MiB copy's enqueue
// on another thread waited the whole 2.4-3.2 ms of registering 48 MiB), so
// the first load's first copies wait for both waves. Registering wave k+1
// only once every worker had a copy out of wave k in flight was tried
// (call G, probes/deferred_waves.patch): correct, and no measurable
// difference on a machine whose first calls spread 0.29-0.45 s; the
// expected gain is under 1 ms.
// Why: on the H200 (bench/results/2026-12-03-h200-session8/pin_probe.log)
// one registration of 128 MiB took 5.3-6.9 ms where 32 of 4 MiB took
// 13-22 ms (the driver runs registrations one after another), and 16
// workers each pinning their own 4 MiB slots had every slot pinned only
// after 25-29 ms; first writes to fresh memory cost about 9 ms per 128 MiB
// over 16 threads there, so they are spread over the workers.
//
// A wave whose registration is refused (no memory, a driver limit) stays
// unpinned for the loader's life and its copies go from pageable memory:
// slower, but the loads still succeed, and every report says so.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_util.h"
#include "exec/sink.h"

namespace weightlift::internal {

class StagingSink final : public Sink {
 public:
  // Tests: called before wave WAVE is registered; a non-OK status stands
  // for the registration's refusal.
  using PinHook = std::function<Status(int wave)>;

  // RING holds SLOT_EVENTS.size() slots of SLOT_BYTES (a multiple of 4096),
  // SLOTS_PER_THREAD per worker (so slot_events.size() / slots_per_thread
  // workers), reserved in SLOTS_PER_THREAD parts (one per wave). Worker w
  // copies on STREAMS[w % STREAMS.size()] (not owned; they must outlive the
  // sink's use) to DEVICE.
  StagingSink(PinnedBuffer ring, CudaEvents slot_events, int slots_per_thread,
              size_t slot_bytes, std::vector<cudaStream_t> streams, int device,
              PinHook before_pin = nullptr);

  uint64_t ring_bytes() const { return ring_.size(); }
  // The pinned ring's memory (io_uring registers it for its reads).
  std::span<std::byte> ring() const { return {ring_.data(), ring_.size()}; }

  // A line for the report on the waves pinned or refused since the last
  // call (nullopt when none). Between loads only.
  std::optional<std::string> TakePinNote();

  uint64_t slot_bytes() const override { return slot_bytes_; }
  Status BeginWorker(int worker) override;
  // Touches worker W's slot of every wave now, on W's thread (before its
  // first load), registering each wave that this completes.
  void PinEarly(int w);
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override;
  void Abandon(int, SinkSlot) override {}  // the slot holds no copies
  void Drain(int worker, CompletionTracker& done) override;

 private:
  enum : int { kUntouched = 0, kTouching = 1, kTouched = 2 };  // a slot
  enum : int { kPending = 0, kPinned = 1, kUnpinned = 2 };     // a wave
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
  struct Wave {
    std::atomic<int> touched{0};  // its slots written at least once
    std::atomic<int> state{kPending};
    Status refusal;  // written before state becomes kUnpinned
  };

  int workers() const { return static_cast<int>(workers_.size()); }
  // First-writes slot K of worker W unless done (waits while another
  // thread does it); registers wave K if this completes it.
  void TouchSlot(int k, int w);
  void PinWave(int k);
  // Returns once wave K is pinned or refused, touching its slots that
  // nobody has touched yet.
  void AwaitWave(int k);

  PinnedBuffer ring_;
  CudaEvents events_;  // one per slot
  size_t slot_bytes_;
  int device_;
  PinHook before_pin_;
  std::vector<Worker> workers_;  // made once; each used by one thread
  std::unique_ptr<Wave[]> waves_;
  int wave_count_ = 0;
  std::unique_ptr<std::atomic<int>[]> touch_;  // per slot, wave-major
};

}  // namespace weightlift::internal
