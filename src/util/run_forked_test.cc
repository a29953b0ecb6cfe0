// The test helper that tells when a test's other threads have settled
// before it forks (testing/run_forked.h): a thread blocked on a condition
// variable counts as asleep, one that keeps running does not.
#include "util/testing/run_forked.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace weightlift::internal::testing {
namespace {

using std::chrono::milliseconds;

TEST(WaitUntilOtherThreadsSleep, ABlockedThreadSettlesABusyOneDoesNot) {
  std::atomic<bool> spin{true};
  std::thread busy([&] {
    while (spin.load(std::memory_order_relaxed)) {
    }
  });
  EXPECT_FALSE(OtherThreadsAsleep());
  EXPECT_FALSE(WaitUntilOtherThreadsSleep(milliseconds(100)));
  spin.store(false);
  busy.join();

  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  std::thread waiting([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return go; });
  });
  EXPECT_TRUE(WaitUntilOtherThreadsSleep(milliseconds(5000)));
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
  }
  cv.notify_all();
  waiting.join();
}

}  // namespace
}  // namespace weightlift::internal::testing
