// `weightlift demo`'s choice of layout for machines other than this one:
// the budget is a quarter of the memory and no more than is available, and
// each layout left out says why.
#include "demo_fit.h"

#include <gtest/gtest.h>

namespace weightlift::cli {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// The host demo's estimates (cmd_demo.cc) for the three layouts.
std::vector<DemoCandidate> HostCandidates(bool disk = true) {
  return {{"llama2-7b", 27 * kGiB, disk},
          {"tinyllama-1.1b", 4 * kGiB + kGiB / 2, disk},
          {"tiny", 300ull << 20, true}};
}

TEST(DemoFit, BudgetIsAQuarterAndNoMoreThanIsAvailable) {
  EXPECT_EQ(DemoMemoryBudget({23 * kGiB, 22 * kGiB}), 23 * kGiB / 4);
  EXPECT_EQ(DemoMemoryBudget({23 * kGiB, 3 * kGiB}), 3 * kGiB);
  EXPECT_EQ(DemoMemoryBudget({0, 3 * kGiB}), 3 * kGiB);
  EXPECT_EQ(DemoMemoryBudget({16 * kGiB, 0}), 4 * kGiB);
  EXPECT_EQ(DemoMemoryBudget({}), 0u);
}

TEST(DemoFit, PicksTheLargestLayoutThatFits) {
  std::vector<std::string> why;
  // The 23 GiB development VM, idle: the 7B layout is over the quarter.
  EXPECT_EQ(PickDemoLayout(HostCandidates(), {23 * kGiB, 22 * kGiB}, &why), 1u);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("llama2-7b"), std::string::npos) << why[0];
  EXPECT_NE(why[0].find("a quarter of this machine's"), std::string::npos)
      << why[0];
  // A 128 GiB machine with room: the largest.
  why.clear();
  EXPECT_EQ(PickDemoLayout(HostCandidates(), {128 * kGiB, 120 * kGiB}, &why),
            0u);
  EXPECT_TRUE(why.empty());
}

TEST(DemoFit, ABusyMachineGetsASmallerLayout) {
  std::vector<std::string> why;
  // The same VM with 3 GiB left: tinyllama would swap.
  EXPECT_EQ(PickDemoLayout(HostCandidates(), {23 * kGiB, 3 * kGiB}, &why), 2u);
  ASSERT_EQ(why.size(), 2u);
  EXPECT_NE(why[1].find("available now"), std::string::npos) << why[1];
}

TEST(DemoFit, FullDiskFallsThroughToTheSmallest) {
  std::vector<std::string> why;
  EXPECT_EQ(PickDemoLayout(HostCandidates(/*disk=*/false),
                           {128 * kGiB, 120 * kGiB}, &why),
            2u);
  ASSERT_EQ(why.size(), 2u);
  EXPECT_NE(why[0].find("not enough free disk"), std::string::npos);
}

TEST(DemoFit, ThisMachinesMemoryIsRead) {
  const MachineMemory m = ReadMachineMemory();
  EXPECT_GT(m.total, 0u);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.total);
}

}  // namespace
}  // namespace weightlift::cli
