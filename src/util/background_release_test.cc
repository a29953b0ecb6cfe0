#include "util/background_release.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace weightlift::internal {
namespace {

// Records on which thread it was destroyed, after a slow destructor.
struct Slow {
  std::atomic<int>* dropped;
  std::thread::id* on;
  ~Slow() {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    *on = std::this_thread::get_id();
    ++*dropped;
  }
};

TEST(BackgroundReleaseTest, DropsOnItsThreadWithoutHoldingUpTheCaller) {
  std::atomic<int> dropped{0};
  std::thread::id on;
  BackgroundRelease r;
  const auto t = std::chrono::steady_clock::now();
  r.Release(std::make_shared<Slow>(&dropped, &on));
  const auto took = std::chrono::steady_clock::now() - t;
  EXPECT_LT(took, std::chrono::milliseconds(25));
  r.Flush();
  EXPECT_EQ(dropped.load(), 1);
  EXPECT_NE(on, std::this_thread::get_id());
}

TEST(BackgroundReleaseTest, TheDestructorFinishesEverythingHandedOver) {
  std::atomic<int> dropped{0};
  std::thread::id on;
  {
    BackgroundRelease r;
    for (int i = 0; i < 3; ++i)
      r.Release(std::make_shared<Slow>(&dropped, &on));
  }
  EXPECT_EQ(dropped.load(), 3);
}

TEST(BackgroundReleaseTest, AnotherOwnerKeepsItAlive) {
  std::atomic<int> dropped{0};
  std::thread::id on;
  auto kept = std::make_shared<Slow>(&dropped, &on);
  BackgroundRelease r;
  r.Release(kept);
  r.Flush();
  EXPECT_EQ(dropped.load(), 0);
  kept.reset();
  EXPECT_EQ(dropped.load(), 1);
}

}  // namespace
}  // namespace weightlift::internal
