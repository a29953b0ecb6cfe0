// WarmMappings on real files: the runs' pages are in the mapping's page
// tables after filling (read back from /proc/self/pagemap), a load takes a
// file's mapping once, taking stops the filling, a file that shrank stops
// it with EFAULT, Release lets every mapping go, and a forked child leaves
// the filling alone.
#include "env/warm_mappings.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "env/env.h"
#include "env/mapped_rows_file.h"
#include "env/testing/temp_dir.h"
#include "util/testing/run_forked.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFileOrDie;

constexpr uint64_t kPage = 4096;

// Whether the page holding ADDR is mapped in this process's page tables
// (pagemap bit 63; readable without privileges, which only zero the PFN).
// nullopt where the kernel does not offer pagemap.
std::optional<bool> Present(const std::byte* addr) {
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) /
                                      kPage * sizeof entry);
  const ssize_t n = pread(fd, &entry, sizeof entry, at);
  close(fd);
  if (n != static_cast<ssize_t>(sizeof entry)) return std::nullopt;
  return (entry >> 63) & 1;
}

class WarmMappingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("rows.bin");
    bytes_ = RandomBytes(8 << 20, 19);
    WriteFileOrDie(path_, bytes_);
  }
  WarmFile Whole(uint32_t index, std::vector<RowRuns> runs) {
    auto f = OpenFile(path_, Backend::kPread);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    auto m = (*f)->Map(0, (*f)->size(), MapAccess::kReadShared);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return WarmFile{index, std::move(*m), std::move(runs)};
  }
  TempDir dir_;
  std::string path_;
  std::vector<std::byte> bytes_;
};

// Sparse runs (one 1 KB run per 24 KiB row, more than kSparseRunGapBytes
// apart: each run's own pages are populated).
const RowRuns kSparse{4096, 24576, 1024, 200};
// Dense runs: the covering range is filled.
const RowRuns kDense{6 << 20, 8192, 1024, 64};

TEST_F(WarmMappingsTest, FillsTheRunsPagesAndHandsTheMappingOverOnce) {
  WarmMappings warm;
  warm.Start({});
  std::vector<WarmFile> files;
  files.push_back(Whole(3, {kSparse, kDense}));
  const std::byte* base = files[0].map.data();
  warm.Start(std::move(files));
  warm.Wait();
  EXPECT_TRUE(warm.Holds(3));
  EXPECT_FALSE(warm.Holds(0));
  EXPECT_FALSE(warm.Take(0).has_value());

  if (!Present(base).has_value()) GTEST_SKIP() << "no /proc/self/pagemap";
  for (uint64_t r = 0; r < kSparse.rows; ++r) {
    const std::byte* run = base + kSparse.offset + r * kSparse.pitch;
    EXPECT_TRUE(*Present(run)) << "row " << r;
  }
  for (uint64_t at = kDense.offset;
       at < kDense.offset + (kDense.rows - 1) * kDense.pitch; at += kPage) {
    EXPECT_TRUE(*Present(base + at)) << "offset " << at;
  }

  std::optional<WarmMapping> took = warm.Take(3);
  ASSERT_TRUE(took.has_value());
  EXPECT_EQ(took->runs_total, kSparse.rows + kDense.rows);
  EXPECT_EQ(took->runs_filled, took->runs_total);
  EXPECT_EQ(took->error, 0);
  EXPECT_GT(took->fill_seconds, 0.0);
  ASSERT_EQ(took->map.size(), bytes_.size());
  EXPECT_EQ(0, std::memcmp(took->map.data(), bytes_.data(), bytes_.size()));
  // One load's: a second take finds nothing.
  EXPECT_FALSE(warm.Take(3).has_value());
  EXPECT_FALSE(warm.Holds(3));

  // The taken mapping serves a load's row runs (mapped_rows_file.h).
  auto base_file = OpenFile(path_, Backend::kPread);
  ASSERT_TRUE(base_file.ok());
  auto f = WithRowsFromMapping(std::move(*base_file), std::move(took->map));
  std::vector<std::byte> got(kSparse.rows * kSparse.width);
  ASSERT_TRUE(f->ReadRows(kSparse.offset, kSparse.pitch, kSparse.width,
                          kSparse.rows, got.data())
                  .ok());
  for (uint64_t r = 0; r < kSparse.rows; ++r) {
    ASSERT_EQ(0, std::memcmp(got.data() + r * kSparse.width,
                             bytes_.data() + kSparse.offset + r * kSparse.pitch,
                             kSparse.width))
        << "row " << r;
  }
  EXPECT_EQ(f->copied_rows().runs, kSparse.rows);
}

TEST_F(WarmMappingsTest, TakingStopsTheFillingWhereItGot) {
  // Enough sparse rows (one madvise each) that filling is still under way
  // when the load comes for the mapping.
  std::vector<RowRuns> many;
  for (int k = 0; k < 200; ++k) many.push_back({0, 32768, 512, 255});
  WarmMappings warm;
  std::vector<WarmFile> files;
  files.push_back(Whole(0, many));
  warm.Start(std::move(files));
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<WarmMapping> took = warm.Take(0);
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  ASSERT_TRUE(took.has_value());
  EXPECT_EQ(took->runs_total, 200u * 255u);
  EXPECT_LE(took->runs_filled, took->runs_total);
  EXPECT_EQ(took->error, 0);
  // Stopped at the next look (every 256 rows), not at the end of the
  // 51000 runs.
  EXPECT_LT(ms, 1000.0);
}

TEST_F(WarmMappingsTest, AFileThatShrankStopsTheFillingWithEfault) {
  std::vector<WarmFile> files;
  files.push_back(Whole(0, {kSparse, kDense}));
  ASSERT_EQ(0, truncate(path_.c_str(), 64 << 10));
  WarmMappings warm;
  warm.Start(std::move(files));
  warm.Wait();
  std::optional<WarmMapping> took = warm.Take(0);
  ASSERT_TRUE(took.has_value());
  EXPECT_EQ(took->error, EFAULT);
  // The rows within the first 64 KiB were filled, then the first one past
  // the end stopped it.
  EXPECT_LT(took->runs_filled, kSparse.rows);
}

TEST_F(WarmMappingsTest, ReleaseLetsEveryUntakenMappingGo) {
  WarmMappings warm;
  std::vector<WarmFile> files;
  files.push_back(Whole(0, {kDense}));
  files.push_back(Whole(1, {kSparse}));
  warm.Start(std::move(files));
  ASSERT_TRUE(warm.Take(1).has_value());
  warm.Release();
  EXPECT_FALSE(warm.Holds(0));
  EXPECT_FALSE(warm.Take(0).has_value());
  warm.Release();  // idempotent
}

// In a child forked while the filling may still run, the mappings are not
// the child's to take (their filling threads stayed in the parent): the
// child's load reads as without prepare, and its destructor does not wait
// for those threads. The parent's are untouched.
TEST_F(WarmMappingsTest, AForkedChildLeavesTheParentsFillingAlone) {
  auto warm = std::make_unique<WarmMappings>();
  std::vector<WarmFile> files;
  files.push_back(Whole(0, {kSparse, kDense}));
  warm->Start(std::move(files));
  // Under ThreadSanitizer a filler that finished before the fork would be
  // reported leaked in the child (run_forked.h): fork once they are done.
  if (testing::kUnderThreadSanitizer) warm->Wait();
  const std::string child = testing::RunForked(
      [&] {
        if (warm->Holds(0)) return 1;
        if (warm->Take(0).has_value()) return 2;
        warm->Wait();
        warm->Release();
        warm.reset();
        return 0;
      },
      std::chrono::seconds(30));
  EXPECT_EQ(child, "exit 0");
  warm->Wait();
  std::optional<WarmMapping> took = warm->Take(0);
  ASSERT_TRUE(took.has_value());
  EXPECT_EQ(took->runs_filled, kSparse.rows + kDense.rows);
}

}  // namespace
}  // namespace weightlift::internal
