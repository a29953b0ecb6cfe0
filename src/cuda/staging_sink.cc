#include "cuda/staging_sink.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cuda/scatter_copy.h"

namespace weightlift::internal {

StagingSink::StagingSink(PinnedBuffer ring, CudaEvents slot_events,
                         int slots_per_thread, size_t slot_bytes,
                         std::vector<cudaStream_t> streams, int device)
    : ring_(std::move(ring)),
      events_(std::move(slot_events)),
      slot_bytes_(slot_bytes),
      device_(device) {
  const size_t per = static_cast<size_t>(std::max(slots_per_thread, 1));
  workers_.resize(events_.size() / per);
  for (size_t w = 0; w < workers_.size(); ++w) {
    Worker& wk = workers_[w];
    wk.stream = streams.empty() ? nullptr : streams[w % streams.size()];
    wk.slots.resize(per);
    for (size_t i = 0; i < per; ++i) {
      const size_t k = w * per + i;
      wk.slots[i].buf = ring_.data() + k * slot_bytes_;
      wk.slots[i].ev = events_[k];
    }
  }
}

Status StagingSink::BeginWorker(int w) {
  if (static_cast<size_t>(w) >= workers_.size()) {
    return Status::Internal("staging worker " + std::to_string(w) +
                            " has no slots (" +
                            std::to_string(workers_.size()) + " workers)");
  }
  Worker& wk = workers_[w];
  wk.next = 0;
  for (Slot& s : wk.slots) s.chunk = nullptr;
  // Slots are pinned when first taken (AcquireSlot), not here: the
  // worker's first copy waits for one slot's pinning, and the next slot
  // pins while that copy runs.
  return UseDevice(device_);
}

void StagingSink::PinEarly(int w) {
  if (static_cast<size_t>(w) < workers_.size() && !workers_[w].slots.empty()) {
    (void)ring_.PinPart(Part(w, 0), device_);
  }
}

StatusOr<SinkSlot> StagingSink::AcquireSlot(int w, const ReadChunk&,
                                            CompletionTracker& done) {
  Worker& wk = workers_[w];
  const int i = wk.next;
  if (const int part = Part(w, i); !ring_.part_pinned(part)) {
    WL_RETURN_IF_ERROR(ring_.PinPart(part, device_));
  }
  wk.next = (i + 1) % static_cast<int>(wk.slots.size());
  Slot& s = wk.slots[i];
  if (s.chunk != nullptr) {
    const cudaError_t e = cudaEventSynchronize(s.ev);
    const ReadChunk* prev = std::exchange(s.chunk, nullptr);
    if (e != cudaSuccess) {
      return CudaStatus(e, "cudaEventSynchronize (staging slot)");
    }
    done.Delivered(*prev);
  }
  return SinkSlot{s.buf, i, false};
}

Status StagingSink::Deliver(int w, const ReadChunk& c, SinkSlot slot,
                            CompletionTracker& done) {
  Worker& wk = workers_[w];
  Slot& s = wk.slots[slot.index];
  Status failed;
  for (const Scatter& sc : c.scatters) {
    failed = CopyScatterToDevice(sc, s.buf, wk.stream);
    if (!failed.ok()) {
      failed = failed.WithContext("staging slot -> device");
      break;
    }
  }
  // Record even after a failed enqueue so that the wait below covers
  // whatever was enqueued before the slot is reused.
  const cudaError_t e = cudaEventRecord(s.ev, wk.stream);
  if (e != cudaSuccess) {
    cudaStreamSynchronize(wk.stream);
    return CudaStatus(e, "cudaEventRecord (staging slot)");
  }
  if (!failed.ok()) {
    cudaEventSynchronize(s.ev);
    return failed;
  }
  s.chunk = &c;
  // Fire on_ready early: retire slots whose copies already finished.
  for (Slot& o : wk.slots) {
    if (&o != &s && o.chunk != nullptr && cudaEventQuery(o.ev) == cudaSuccess) {
      done.Delivered(*std::exchange(o.chunk, nullptr));
    }
  }
  return Status::OK();
}

void StagingSink::Drain(int w, CompletionTracker& done) {
  if (static_cast<size_t>(w) >= workers_.size()) return;
  // The staging ring must be idle before it is reused or freed.
  for (Slot& s : workers_[w].slots) {
    if (s.chunk == nullptr) continue;
    const cudaError_t e = cudaEventSynchronize(s.ev);
    const ReadChunk* c = std::exchange(s.chunk, nullptr);
    if (e != cudaSuccess) {
      done.Fail(CudaStatus(e, "cudaEventSynchronize (staging drain)"));
    } else {
      done.Delivered(*c);
    }
  }
}

}  // namespace weightlift::internal
