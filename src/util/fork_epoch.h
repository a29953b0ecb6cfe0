// What fork() leaves of an object that owns threads, and how such an
// object notices.
//
// A forked child has only the thread that called fork(). Every object it
// inherited still holds the handles of the parent's threads, and its
// mutexes and condition variables in whatever state those threads left
// them: joining such a handle waits forever for a thread that does not
// exist here, and destroying a condition variable a parent thread waited
// on does too (glibc waits for the waiters to leave). A Python server that
// loads in its parent and forks workers (multiprocessing, a pre-forking
// server) hit exactly that: the child's first load, or the loader's
// destructor, hung. So every object of ours that owns threads records the
// fork epoch it was made in, and in a forked child it neither uses nor
// joins them: its calls say why they cannot run, and its destructor leaves
// what the parent's threads owned alone (a leak of the handles, once per
// object per fork, where the alternative is a hang).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "weightlift/status.h"

namespace weightlift::internal {

// How many fork()s lie between this process and the one that first called
// this function: 0 there, and one more in each forked child (counted by a
// pthread_atfork handler that the first call registers).
uint64_t ForkEpoch();

// The process an object was made in.
class MadeInProcess {
 public:
  MadeInProcess() : epoch_(ForkEpoch()) {}
  // True in a child forked after the object was made.
  bool forked() const { return ForkEpoch() != epoch_; }
  // When forked(): Unsupported, "WHAT was made before this process (pid N)
  // was forked from its parent, and its threads stayed in the parent, so
  // it cannot run here: REMEDY". OK otherwise.
  // Builds no string unless forked (loads call it on their way in).
  Status CheckNotForked(std::string_view what, std::string_view remedy) const;

 private:
  uint64_t epoch_;
};

// Lets go of threads that stayed in the parent without joining them: their
// handles are moved to memory that is never freed (destroying a joinable
// std::thread would terminate the process).
void AbandonThreads(std::vector<std::thread>&& threads);
void AbandonThread(std::thread&& thread);

// Keeps WHAT (the parent's threads' data) for the life of the process,
// never destroyed, reachable from a global list.
void Abandon(std::shared_ptr<void> what);

}  // namespace weightlift::internal
