#include "util/thread_count.h"

#include <algorithm>
#include <thread>

namespace weightlift::internal {

int ThreadCount(int requested, ThreadUse use, unsigned hardware_threads,
                int sharing) {
  if (requested > 0) return requested;
  constexpr unsigned kUnknownCores = 8;
  const int cores = std::max(
      1, static_cast<int>(std::min(
             hardware_threads == 0 ? kUnknownCores : hardware_threads, 1024u)) /
             std::max(1, sharing));
  switch (use) {
    case ThreadUse::kBufferedReads:
      return std::clamp(cores, 1, 8);
    case ThreadUse::kDirectReads:
      return std::clamp(2 * std::clamp(cores, 1, 8), 4, 16);
    case ThreadUse::kCudaStaging:
      return std::clamp(sharing > 1 ? cores : cores - cores / 4, 1, 16);
  }
  return 1;
}

int ThreadCount(int requested, ThreadUse use) {
  return ThreadCount(requested, use, std::thread::hardware_concurrency());
}

std::string SharedCoresNote(int requested, int threads,
                            unsigned hardware_threads, int sharing) {
  if (requested > 0 || sharing <= 1) return {};
  return "threads: " + std::to_string(threads) + ", this process's share of " +
         (hardware_threads == 0 ? std::string("an unknown number of")
                                : std::to_string(hardware_threads)) +
         " cores shared by " + std::to_string(sharing) +
         " processes loading on this host (local_world_size, from "
         "LOCAL_WORLD_SIZE)";
}

}  // namespace weightlift::internal
