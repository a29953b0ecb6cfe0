#include "util/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace weightlift::internal {
namespace {

using std::chrono::hours;
using std::chrono::nanoseconds;

// Eight threads deliver bytes at once with no rate limit: the callback is
// never entered twice at a time, `done` only grows, and the last call is
// (total, total), made once.
TEST(ProgressReporter, ConcurrentAddsGiveOrderedSerializedCalls) {
  constexpr int kThreads = 8, kAdds = 5000;
  constexpr uint64_t kBytes = 3;
  const uint64_t total = kThreads * kAdds * kBytes;
  std::vector<uint64_t> seen;
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  ProgressReporter p(
      [&](uint64_t done, uint64_t t) {
        if (inside.exchange(true)) ++overlaps;
        EXPECT_EQ(t, total);
        seen.push_back(done);  // safe only because calls never overlap
        inside.store(false);
      },
      total, nanoseconds(0));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) p.Add(kBytes);
    });
  }
  for (auto& th : threads) th.join();
  p.Finish();
  p.Finish();  // a second Finish adds nothing
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_FALSE(seen.empty());
  EXPECT_GT(seen.size(), 1u) << "no call before the end";
  for (size_t i = 1; i < seen.size(); ++i) {
    ASSERT_LT(seen[i - 1], seen[i]) << "call " << i << " went backwards";
  }
  EXPECT_EQ(seen.back(), total);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), total), 1);
  EXPECT_EQ(p.delivered(), total);
}

TEST(ProgressReporter, RateLimitLeavesOnlyTheFinalCall) {
  std::vector<uint64_t> seen;
  ProgressReporter p([&](uint64_t done, uint64_t) { seen.push_back(done); },
                     100, hours(1));
  for (int i = 0; i < 10; ++i) p.Add(10);
  p.Finish();
  EXPECT_EQ(seen, std::vector<uint64_t>({100}));
}

TEST(ProgressReporter, EmptyLoadAndNoCallback) {
  std::vector<uint64_t> seen;
  ProgressReporter empty(
      [&](uint64_t done, uint64_t total) {
        seen.push_back(done);
        EXPECT_EQ(total, 0u);
      },
      0, nanoseconds(0));
  empty.Finish();
  EXPECT_EQ(seen, std::vector<uint64_t>({0}));
  ProgressReporter none(nullptr, 10, nanoseconds(0));
  none.Add(10);
  none.Finish();  // nothing to call, nothing to crash
  EXPECT_EQ(none.delivered(), 10u);
}

}  // namespace
}  // namespace weightlift::internal
