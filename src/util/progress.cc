#include "util/progress.h"

namespace weightlift::internal {

ProgressReporter::ProgressReporter(Callback callback, uint64_t total,
                                   std::chrono::nanoseconds min_interval)
    : callback_(std::move(callback)),
      total_(total),
      min_interval_(min_interval),
      start_(std::chrono::steady_clock::now()),
      last_call_(start_) {}

void ProgressReporter::Add(uint64_t bytes) {
  const uint64_t done =
      delivered_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (!callback_ || done >= total_) return;  // the end is Finish()'s
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (now - last_call_ < min_interval_) return;
  // Read again under the lock: the counter only grows, so what is reported
  // now is at least what any earlier call reported.
  const uint64_t now_done = delivered_.load(std::memory_order_relaxed);
  if (now_done >= total_ || (reported_any_ && now_done <= last_done_)) return;
  last_call_ = now;
  Report(now_done);
}

void ProgressReporter::Finish() {
  if (!callback_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (reported_any_ && last_done_ == total_) return;
  Report(total_);
}

void ProgressReporter::Report(uint64_t done) {
  last_done_ = done;
  reported_any_ = true;
  callback_(done, total_);
}

}  // namespace weightlift::internal
