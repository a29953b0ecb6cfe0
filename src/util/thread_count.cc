#include "util/thread_count.h"

#include <algorithm>
#include <thread>

namespace weightlift::internal {

int ThreadCount(int requested, ThreadUse use, unsigned hardware_threads) {
  if (requested > 0) return requested;
  constexpr unsigned kUnknownCores = 8;
  const int cores = static_cast<int>(std::min(
      hardware_threads == 0 ? kUnknownCores : hardware_threads, 1024u));
  switch (use) {
    case ThreadUse::kBufferedReads:
      return std::clamp(cores, 1, 8);
    case ThreadUse::kDirectReads:
      return std::clamp(2 * std::clamp(cores, 1, 8), 4, 16);
    case ThreadUse::kCudaStaging:
      return std::clamp(cores, 1, 16);
  }
  return 1;
}

int ThreadCount(int requested, ThreadUse use) {
  return ThreadCount(requested, use, std::thread::hardware_concurrency());
}

}  // namespace weightlift::internal
