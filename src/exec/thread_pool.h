// A fixed set of worker threads, created once (per loader) and reused for
// every load: Run(fn) calls fn(worker_index) on every worker concurrently and
// returns when all have returned.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "weightlift/status.h"

namespace weightlift::internal {

class ThreadPool {
 public:
  // ON_START(i), when given, runs first on worker i's own thread, before
  // it takes any job (a job given meanwhile waits for it): per-thread setup
  // that overlaps whatever the caller does next. It must not throw.
  explicit ThreadPool(int threads, std::function<void(int)> on_start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  // ResourceExhausted when the system refused a thread (the pool then has
  // fewer workers than asked for); callers fail their Create with it, since
  // no exception may cross the library API.
  const Status& status() const { return status_; }

  // Runs FN(i) for i in [0, min(N, size())) on the workers (N < 0: all) and
  // waits for every call to return. FN must not throw. Not reentrant: one
  // Run at a time (callers serialize).
  void Run(const std::function<void(int)>& fn, int n = -1);

 private:
  void Loop(int index);

  std::function<void(int)> on_start_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int active_ = 0;   // workers taking part in the current job
  int running_ = 0;  // of those, still running
  uint64_t generation_ = 0;
  bool stop_ = false;
  Status status_;
};

}  // namespace weightlift::internal
