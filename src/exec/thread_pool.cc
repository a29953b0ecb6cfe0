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
  if (made_.forked()) {
    AbandonThreads(std::move(workers_));
    Abandon(std::shared_ptr<void>(std::move(shared_)));  // see Shared
    return;
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->start_cv.notify_all();
  for (auto& t : workers_) t.join();
}

Status ThreadPool::Run(const std::function<void(int)>& fn, int n) {
  WL_RETURN_IF_ERROR(made_.CheckNotForked("this loader's thread pool",
                                          "make a new loader in this process"));
  const int count = n < 0 ? size() : std::min(n, size());
  if (count <= 0) return Status::OK();
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.job = &fn;
  s.active = count;
  s.running = count;
  ++s.generation;
  s.start_cv.notify_all();
  s.done_cv.wait(lock, [&s] { return s.running == 0; });
  s.job = nullptr;
  return Status::OK();
}

void ThreadPool::Loop(int index) {
  if (on_start_) on_start_(index);
  started_.fetch_add(1, std::memory_order_release);
  Shared& s = *shared_;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(s.mu);
  while (true) {
    s.start_cv.wait(lock, [&] { return s.stop || s.generation != seen; });
    if (s.stop) return;
    seen = s.generation;
    if (index >= s.active) continue;
    const std::function<void(int)>* job = s.job;
    lock.unlock();
    (*job)(index);
    lock.lock();
    if (--s.running == 0) s.done_cv.notify_all();
  }
}

}  // namespace weightlift::internal
