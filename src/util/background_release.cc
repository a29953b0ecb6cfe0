#include "util/background_release.h"

#include <system_error>
#include <utility>

namespace weightlift::internal {

void BackgroundRelease::Run(Queue& q) {
  std::unique_lock<std::mutex> lock(q.mu);
  for (;;) {
    q.cv.wait(lock, [&] { return q.stop || !q.items.empty(); });
    if (q.items.empty()) return;  // stopping, and nothing left
    std::shared_ptr<void> item = std::move(q.items.front());
    q.items.pop_front();
    ++q.busy;
    lock.unlock();
    item.reset();  // the slow part, outside the lock
    lock.lock();
    --q.busy;
    q.cv.notify_all();
  }
}

void BackgroundRelease::Release(std::shared_ptr<void> what) {
  if (!what) return;
  if (made_.forked()) return;  // dropped here; the thread is the parent's
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->items.push_back(std::move(what));
  }
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([q = q_] { Run(*q); });
    } catch (const std::system_error&) {
      std::lock_guard<std::mutex> lock(q_->mu);
      q_->items.clear();  // dropped here, under the lock: nothing else runs
      return;
    }
  }
  q_->cv.notify_all();
}

void BackgroundRelease::Flush() {
  std::unique_lock<std::mutex> lock(q_->mu);
  q_->cv.wait(lock, [&] {
    return (q_->items.empty() || !thread_.joinable()) && q_->busy == 0;
  });
}

BackgroundRelease::~BackgroundRelease() {
  if (made_.forked()) {
    if (thread_.joinable()) AbandonThread(std::move(thread_));
    Abandon(std::move(q_));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->stop = true;
  }
  q_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace weightlift::internal
