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
  // CUDA staging alone: three quarters of the cores, up to 16.
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 1), 1);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 2), 2);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 4), 3);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 16), 12);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 24), 16);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 64), 16);
}

TEST(ThreadCount, UnknownCoresCountAsEight) {
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 0), 8);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 0), 16);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 0), 6);  // 8 - 8 / 4
}

// Processes loading at once on one host (local_world_size) share its
// cores: each gets its share, at least one; a requested count still wins.
TEST(ThreadCount, CoLocatedProcessesShareTheCores) {
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 16, 1), 12);  // alone
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 16, 2), 8);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 16, 8), 2);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 16, 32), 1);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kBufferedReads, 16, 4), 4);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kDirectReads, 16, 8), 4);
  EXPECT_EQ(ThreadCount(0, ThreadUse::kCudaStaging, 0, 4), 2);  // 8 / 4
  EXPECT_EQ(ThreadCount(5, ThreadUse::kCudaStaging, 16, 8), 5);
}

TEST(ThreadCount, TheReportSaysWhenTheCoresAreShared) {
  EXPECT_EQ(SharedCoresNote(0, 16, 16, 1), "");
  EXPECT_EQ(SharedCoresNote(4, 4, 16, 8), "");  // requested: no sharing
  EXPECT_EQ(SharedCoresNote(0, 2, 16, 8),
            "threads: 2, this process's share of 16 cores shared by 8 "
            "processes loading on this host (local_world_size, from "
            "LOCAL_WORLD_SIZE)");
}

}  // namespace
}  // namespace weightlift::internal
