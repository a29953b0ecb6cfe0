#include "cuda/load_job.h"

#include <utility>

#include "exec/request.h"

namespace weightlift::internal {

Job::Job(const Checkpoint& c, std::vector<TensorSelection> sel,
         std::vector<uintptr_t> d, const LoadCallbacks& cb, uint64_t tot)
    : ckpt(&c),
      selections(std::move(sel)),
      tensors(TensorsOf(selections)),
      dst(std::move(d)),
      callbacks(&cb),
      remaining(new std::atomic<uint32_t>[tensors.size()]),
      total(tot),
      progress(cb.on_progress, tot, ProgressReporter::kDefaultInterval) {}

void Job::Fail(Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) first_error_ = std::move(s);
  failed.store(true, std::memory_order_relaxed);
}

Status Job::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void Job::Delivered(uint32_t r, uint64_t len) {
  progress.Add(len);
  if (remaining[r].fetch_sub(1, std::memory_order_acq_rel) == 1) {
    ReadyNow(r);
  }
}

void Job::DeliveredChunk(const ReadChunk& chunk) {
  for (const Scatter& sc : chunk.scatters) Delivered(sc.tensor, sc.bytes());
}

void Job::ReadyNow(uint32_t r) {
  if (callbacks->on_ready && !failed.load(std::memory_order_relaxed)) {
    callbacks->on_ready(r, ckpt->tensors()[tensors[r]]);
  }
}

}  // namespace weightlift::internal
