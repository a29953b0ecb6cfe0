// A fixed set of worker threads, created once (per loader) and reused for
// every load: Run(fn) calls fn(worker_index) on every worker concurrently and
// returns when all have returned.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "util/fork_epoch.h"
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
  // Whether every worker has run its ON_START: a Run now starts at once
  // instead of waiting for them.
  bool started() const {
    return started_.load(std::memory_order_acquire) == size();
  }
  // ResourceExhausted when the system refused a thread (the pool then has
  // fewer workers than asked for); callers fail their Create with it, since
  // no exception may cross the library API.
  const Status& status() const { return status_; }

  // Runs FN(i) for i in [0, min(N, size())) on the workers (N < 0: all) and
  // waits for every call to return. FN must not throw. Not reentrant: one
  // Run at a time (callers serialize). In a child forked after the pool
  // was made (its workers stayed in the parent): runs nothing and returns
  // Unsupported.
  Status Run(const std::function<void(int)>& fn, int n = -1);

 private:
  // What the workers wait on. In a forked child it is left as it is, never
  // destroyed: a parent worker may have held the mutex or waited on a
  // condition variable when the process forked (fork_epoch.h).
  struct Shared {
    std::mutex mu;
    std::condition_variable start_cv;
    std::condition_variable done_cv;
    const std::function<void(int)>* job = nullptr;
    int active = 0;   // workers taking part in the current job
    int running = 0;  // of those, still running
    uint64_t generation = 0;
    bool stop = false;
  };
  void Loop(int index);

  MadeInProcess made_;
  std::function<void(int)> on_start_;
  std::unique_ptr<Shared> shared_ = std::make_unique<Shared>();
  std::vector<std::thread> workers_;
  std::atomic<int> started_{0};  // workers past their ON_START
  Status status_;
};

}  // namespace weightlift::internal
