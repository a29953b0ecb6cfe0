#include "util/fork_epoch.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

namespace weightlift::internal {
namespace {

std::atomic<uint64_t> g_epoch{0};

void CountForkInChild() { g_epoch.fetch_add(1, std::memory_order_relaxed); }

// What was abandoned, kept reachable from here for the life of the process
// (never joined, never destroyed).
struct Abandoned {
  std::shared_ptr<void> what;
  Abandoned* next = nullptr;
};
std::atomic<Abandoned*> g_abandoned{nullptr};

}  // namespace

uint64_t ForkEpoch() {
  // Registered before the first object that asks is made, so before any
  // fork() that such an object could outlive.
  static const bool registered =
      pthread_atfork(nullptr, nullptr, &CountForkInChild) == 0;
  (void)registered;
  return g_epoch.load(std::memory_order_relaxed);
}

Status MadeInProcess::CheckNotForked(std::string_view what,
                                     std::string_view remedy) const {
  if (!forked()) return Status::OK();
  return Status::Unsupported(
      std::string(what) + " was made before this process (pid " +
      std::to_string(::getpid()) +
      ") was forked from its parent, and its threads stayed in the parent, "
      "so it cannot run here: " +
      std::string(remedy));
}

void Abandon(std::shared_ptr<void> what) {
  if (what == nullptr) return;
  auto* a = new Abandoned{std::move(what)};
  a->next = g_abandoned.load(std::memory_order_relaxed);
  while (!g_abandoned.compare_exchange_weak(a->next, a,
                                            std::memory_order_release)) {
  }
}

void AbandonThreads(std::vector<std::thread>&& threads) {
  if (threads.empty()) return;
  Abandon(std::make_shared<std::vector<std::thread>>(std::move(threads)));
}

void AbandonThread(std::thread&& thread) {
  if (!thread.joinable()) return;
  std::vector<std::thread> one;
  one.push_back(std::move(thread));
  AbandonThreads(std::move(one));
}

}  // namespace weightlift::internal
