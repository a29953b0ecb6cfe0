// Progress callbacks that callers can trust: whatever threads deliver bytes,
// the callback is never entered by two threads at once, `done` never goes
// backwards, and the last call is (total, total) exactly once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace weightlift::internal {

class ProgressReporter {
 public:
  using Callback = std::function<void(uint64_t done, uint64_t total)>;
  // The loaders' spacing of calls before the end (LoadCallbacks says 50 ms).
  static constexpr std::chrono::milliseconds kDefaultInterval{50};

  // CALLBACK may be empty (then nothing is ever called). Calls before the
  // end are at least MIN_INTERVAL apart.
  ProgressReporter(Callback callback, uint64_t total,
                   std::chrono::nanoseconds min_interval);

  // BYTES more were delivered (any thread). May call the callback with the
  // bytes delivered so far; a thread that finds another one inside the
  // callback does not wait for it (that one, or a later call, reports the
  // larger count).
  void Add(uint64_t bytes);

  // The load is complete: calls (total, total) unless that was the last
  // call made. Waits for a call in progress on another thread.
  void Finish();

  uint64_t delivered() const {
    return delivered_.load(std::memory_order_relaxed);
  }

 private:
  void Report(uint64_t done);  // with mu_ held

  const Callback callback_;
  const uint64_t total_;
  const std::chrono::nanoseconds min_interval_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> delivered_{0};
  std::mutex mu_;
  uint64_t last_done_ = 0;  // guarded by mu_
  bool reported_any_ = false;
  std::chrono::steady_clock::time_point last_call_;
};

}  // namespace weightlift::internal
