#include "util/thread_count.h"

#include <gtest/gtest.h>

namespace weightlift::internal {
namespace {

TEST(ThreadCount, ARequestedCountWinsForEveryUse) {
  for (ThreadUse use : {ThreadUse::kBufferedReads, ThreadUse::kDirectReads,
                        ThreadUse::kCudaStaging}) {
    EXPECT_EQ(ThreadCount(3, use, 64), 3);
    EXPECT_EQ(ThreadCount(200, use, 2), 200);
  }
}

TEST(ThreadCount, DefaultsByUseAndCores) {
  // Buffered: one per core, 1 to 8.
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 1), 1);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 2), 2);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 64), 8);
  // O_DIRECT: twice that, 4 to 16.
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 1), 4);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 2), 4);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 6), 12);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 64), 16);
  // CUDA staging: one per core, up to 16.
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 4), 4);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 64), 16);
}

TEST(ThreadCount, UnknownCoresCountAsEight) {
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 0), 8);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 0), 16);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 0), 8);
}

}  // namespace
}  // namespace weightlift::internal
