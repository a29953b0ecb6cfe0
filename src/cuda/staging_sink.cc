#include "cuda/staging_sink.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "cuda/scatter_copy.h"

namespace weightlift::internal {

StagingSink::StagingSink(PinnedBuffer ring, CudaEvents slot_events,
                         int slots_per_thread, size_t slot_bytes,
                         std::vector<cudaStream_t> streams, int device,
                         PinHook before_pin)
    : ring_(std::move(ring)),
      events_(std::move(slot_events)),
      slot_bytes_(slot_bytes),
      device_(device),
      before_pin_(std::move(before_pin)) {
  const size_t per = static_cast<size_t>(std::max(slots_per_thread, 1));
  const size_t n = events_.size() / per;
  workers_.resize(n);
  wave_count_ = static_cast<int>(per);
  waves_ = std::make_unique<Wave[]>(per);
  touch_ = std::make_unique<std::atomic<int>[]>(per * n);
  for (size_t k = 0; k < per * n; ++k) touch_[k].store(kUntouched);
  for (size_t w = 0; w < n; ++w) {
    Worker& wk = workers_[w];
    wk.stream = streams.empty() ? nullptr : streams[w % streams.size()];
    wk.slots.resize(per);
    for (size_t i = 0; i < per; ++i) {
      const size_t k = i * n + w;  // wave-major: wave i is contiguous
      wk.slots[i].buf = ring_.data() + k * slot_bytes_;
      wk.slots[i].ev = events_[k];
    }
  }
}

Status StagingSink::BeginWorker(int w) {
  if (w < 0 || w >= workers()) {
    return Status::Internal("staging worker " + std::to_string(w) +
                            " has no slots (" + std::to_string(workers()) +
                            " workers)");
  }
  Worker& wk = workers_[w];
  wk.next = 0;
  for (Slot& s : wk.slots) s.chunk = nullptr;
  return UseDevice(device_);
}

void StagingSink::PinEarly(int w) {
  if (w < 0 || w >= workers()) return;
  for (int k = 0; k < wave_count_; ++k) TouchSlot(k, w);
}

void StagingSink::TouchSlot(int k, int w) {
  std::atomic<int>& t = touch_[static_cast<size_t>(k) * workers() + w];
  int state = kUntouched;
  if (!t.compare_exchange_strong(state, kTouching, std::memory_order_acq_rel)) {
    // Done, or another thread is writing it: a read into the slot must
    // not race that thread's zeroing.
    while ((state = t.load(std::memory_order_acquire)) == kTouching) {
      t.wait(kTouching, std::memory_order_acquire);
    }
    return;
  }
  // First writes of fresh memory (its page faults) on this thread, so that
  // registering the wave only pins pages already there.
  std::memset(workers_[w].slots[k].buf, 0, slot_bytes_);
  t.store(kTouched, std::memory_order_release);
  t.notify_all();
  if (waves_[k].touched.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      workers()) {
    PinWave(k);
  }
}

void StagingSink::PinWave(int k) {
  Wave& wave = waves_[k];
  Status st = before_pin_ ? before_pin_(k) : Status::OK();
  if (st.ok()) st = ring_.PinPart(k, device_);
  if (st.ok()) {
    wave.state.store(kPinned, std::memory_order_release);
  } else {
    wave.refusal = std::move(st);
    wave.state.store(kUnpinned, std::memory_order_release);
  }
  wave.state.notify_all();
}

void StagingSink::AwaitWave(int k) {
  Wave& wave = waves_[k];
  if (wave.state.load(std::memory_order_acquire) != kPending) return;
  for (int w = 0; w < workers(); ++w) TouchSlot(k, w);
  while (wave.state.load(std::memory_order_acquire) == kPending) {
    wave.state.wait(kPending, std::memory_order_acquire);
  }
}

StatusOr<SinkSlot> StagingSink::AcquireSlot(int w, const ReadChunk&,
                                            CompletionTracker& done) {
  Worker& wk = workers_[w];
  const int i = wk.next;
  TouchSlot(i, w);
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
  // Pinned, or refused (then the copies go from pageable memory).
  AwaitWave(slot.index);
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
  if (w < 0 || w >= workers()) return;
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

std::optional<std::string> StagingSink::TakePinNote() {
  const std::vector<double> secs = ring_.TakePinSeconds();
  std::string pinned, refused;
  int n_pinned = 0;
  for (int k = 0; k < wave_count_; ++k) {
    const int state = waves_[k].state.load(std::memory_order_acquire);
    if (state == kPinned && k < static_cast<int>(secs.size()) && secs[k] > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", n_pinned ? " + " : "",
                    secs[k] * 1e3);
      pinned += buf;
      ++n_pinned;
    } else if (state == kUnpinned) {
      refused += (refused.empty() ? "" : "; ") + std::string("wave ") +
                 std::to_string(k + 1) + ": " + waves_[k].refusal.message();
    }
  }
  if (n_pinned == 0 && refused.empty()) return std::nullopt;
  const double mib = static_cast<double>(slot_bytes_) / (1 << 20);
  std::string note;
  if (n_pinned > 0) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "staging ring pinned since the last load: %d of %d waves "
                  "(a wave: one %.0f MiB slot of each of %d workers, "
                  "first-written by them) registered in ",
                  n_pinned, wave_count_, mib, workers());
    note = buf + pinned + " ms";
  }
  if (!refused.empty()) {
    note += (note.empty() ? "" : "; ") +
            std::string(
                "staging ring not pinned (its copies go from "
                "pageable memory, slower): ") +
            refused;
  }
  return note;
}

}  // namespace weightlift::internal
