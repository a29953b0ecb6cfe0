// Lets go of objects whose destruction is slow (unregistering gigabytes of
// pages from CUDA, unmapping them) on a thread of its own, after the load
// that used them has returned, instead of on its clock. The thread starts
// at the first Release and stays; the destructor lets it finish what was
// handed over and joins it, so nothing outlives the owner. In a child
// forked after the thread started, nothing is released or joined
// (util/fork_epoch.h): the thread and what it held stayed in the parent.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "util/fork_epoch.h"

namespace weightlift::internal {

class BackgroundRelease {
 public:
  BackgroundRelease() = default;
  BackgroundRelease(const BackgroundRelease&) = delete;
  BackgroundRelease& operator=(const BackgroundRelease&) = delete;
  ~BackgroundRelease();

  // Drops WHAT (this owner's reference) on the thread. Without a thread
  // (std::system_error) drops it here.
  void Release(std::shared_ptr<void> what);
  // Waits until everything handed over so far is dropped (tests).
  void Flush();

 private:
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<void>> items;
    size_t busy = 0;  // items taken and still being dropped
    bool stop = false;
  };
  static void Run(Queue& q);

  std::shared_ptr<Queue> q_ = std::make_shared<Queue>();
  std::thread thread_;
  MadeInProcess made_;
};

}  // namespace weightlift::internal
