// `weightlift demo`'s choice of layout for machines other than this one:
// the budget is a quarter of the memory and no more than is available, and
// each layout left out says why.
#include "demo_fit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "env/testing/temp_dir.h"

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
  EXPECT_EQ(why[0], "over a quarter of this machine's 23.00 GiB of memory");
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
  EXPECT_EQ(why[1], "over the 3.00 GiB of memory available now");
}

TEST(DemoFit, FullDiskFallsThroughToTheSmallest) {
  std::vector<std::string> why;
  EXPECT_EQ(PickDemoLayout(HostCandidates(/*disk=*/false),
                           {128 * kGiB, 120 * kGiB}, &why),
            2u);
  ASSERT_EQ(why.size(), 2u);
  EXPECT_NE(why[0].find("not enough free disk"), std::string::npos);
}

void Put(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

TEST(DemoFit, AContainersLimitIsTheMachine) {
  internal::testing::TempDir root;
  const std::filesystem::path r = root.path();
  // cgroup v2: the pod's limit (8 GiB) above the container's (none set).
  Put(r / "kubepods/pod1/memory.max", std::to_string(8 * kGiB));
  Put(r / "kubepods/pod1/c1/memory.max", "max");
  Put(r / "kubepods/pod1/c1/memory.current", std::to_string(5 * kGiB));
  const CgroupMemory v2 = ReadCgroupMemory(r, "0::/kubepods/pod1/c1\n");
  EXPECT_EQ(v2.limit, 8 * kGiB);
  EXPECT_EQ(v2.usage, 5 * kGiB);
  // On a 512 GiB host with 400 GiB available: 8 GiB total, 3 GiB left,
  // so the demo picks the tiny layout, not the 27 GiB one.
  const MachineMemory m = WithinCgroup({512 * kGiB, 400 * kGiB}, v2);
  EXPECT_EQ(m.total, 8 * kGiB);
  EXPECT_EQ(m.available, 3 * kGiB);
  std::vector<std::string> why;
  EXPECT_EQ(PickDemoLayout(HostCandidates(), m, &why), 2u);

  // cgroup v1: memory.limit_in_bytes; "no limit" is a huge number.
  Put(r / "memory/docker/abc/memory.limit_in_bytes", std::to_string(6 * kGiB));
  Put(r / "memory/docker/abc/memory.usage_in_bytes", std::to_string(kGiB));
  Put(r / "memory/memory.limit_in_bytes", "9223372036854771712");
  const CgroupMemory v1 =
      ReadCgroupMemory(r, "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n");
  EXPECT_EQ(v1.limit, 6 * kGiB);
  EXPECT_EQ(v1.usage, kGiB);
  // No limit anywhere: the machine as it is.
  const CgroupMemory none = ReadCgroupMemory(r, "4:memory:/\n");
  EXPECT_EQ(none.limit, 0u);
  EXPECT_EQ(WithinCgroup({16 * kGiB, 10 * kGiB}, none).available, 10 * kGiB);
  EXPECT_EQ(ReadCgroupMemory(r / "absent", "0::/x\n").limit, 0u);
}

TEST(DemoFit, ThisMachinesMemoryIsRead) {
  const MachineMemory m = ReadMachineMemory();
  EXPECT_GT(m.total, 0u);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.total);
}

}  // namespace
}  // namespace weightlift::cli
