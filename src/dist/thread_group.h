// ThreadGroup: a process group whose ranks are threads of this process and
// whose collectives are memcpys between their host buffers. Used by the
// group plan's tests (the same RunBatch code the NCCL path runs, with real
// bytes moving) and usable for host loads split over threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "weightlift/group.h"

namespace weightlift::internal {

class ThreadGroup {
 public:
  // SIZE ranks; a collective that not every rank joins within TIMEOUT
  // fails on the ranks that did (IoError), and the group is broken after.
  ThreadGroup(int size, std::chrono::milliseconds timeout);
  ~ThreadGroup();
  // The transport of rank R; valid while the ThreadGroup lives. Each rank's
  // transport is used by one thread.
  GroupTransport& rank(int r);

 private:
  class Rank;
  friend class Rank;
  // Posts this rank's buffer for the current collective, waits for all
  // ranks, runs COPY (reading the others' posted buffers), then waits until
  // every rank has copied so no buffer is released early.
  template <typename Copy>
  Status Exchange(int r, void* data, const char* what, Copy copy);

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<void*> posted_;
  int arrived_ = 0;
  int departed_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace weightlift::internal
