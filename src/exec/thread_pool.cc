#include "exec/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

namespace weightlift::internal {

ThreadPool::ThreadPool(int threads, std::function<void(int)> on_start)
    : on_start_(std::move(on_start)) {
  threads = std::max(1, threads);
  workers_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    try {
      workers_.emplace_back([this, i] { Loop(i); });
    } catch (const std::system_error& e) {
      status_ = Status::ResourceExhausted(
          "creating loader thread " + std::to_string(i + 1) + " of " +
          std::to_string(threads) + " failed: " + e.what());
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Run(const std::function<void(int)>& fn, int n) {
  const int count = n < 0 ? size() : std::min(n, size());
  if (count <= 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  active_ = count;
  running_ = count;
  ++generation_;
  start_cv_.notify_all();
  done_cv_.wait(lock, [this] { return running_ == 0; });
  job_ = nullptr;
}

void ThreadPool::Loop(int index) {
  if (on_start_) on_start_(index);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= active_) continue;
    const std::function<void(int)>* job = job_;
    lock.unlock();
    (*job)(index);
    lock.lock();
    if (--running_ == 0) done_cv_.notify_all();
  }
}

}  // namespace weightlift::internal
