// WarmRowPages (prepare's row-page filling) with the host loader, on a real
// file: the runs it fills are the ones the load copies, the load takes the
// filled mapping and says so, bit-exact; the next load makes its own; a
// file below the residency threshold or a load through another backend
// leaves nothing mapped.
#include "exec/warm_row_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "env/testing/temp_dir.h"
#include "env/warm_mappings.h"
#include "exec/host_loader.h"
#include "format/held_files.h"
#include "format/writer.h"
#include "util/testing/reference_gather.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;

constexpr uint64_t kRows = 2048, kCols = 1024;  // bf16: 2048-byte rows

class WarmRowPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = RandomBytes(kRows * kCols * 2, 5);
    norm_ = RandomBytes(kCols * 4, 6);
    std::vector<TensorToWrite> t(2);
    t[0].name = "w";
    t[0].dtype = DType::kBF16;
    t[0].shape = {kRows, kCols};
    t[0].data = weights_;
    t[1].name = "norm";
    t[1].dtype = DType::kF32;
    t[1].shape = {kCols};
    t[1].data = norm_;
    path_ = dir_.File("model.safetensors");
    ASSERT_TRUE(WriteSafetensors(path_, t, WriteOptions{}).ok());
    auto c = Checkpoint::Open(path_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ckpt_ = std::make_unique<Checkpoint>(std::move(*c));
  }
  // Every file counts as resident, so that auto reads it buffered, row
  // runs out of a mapping, wherever the test runs.
  static LoadOptions Options(Backend b = Backend::kAuto) {
    LoadOptions o;
    o.backend = b;
    o.threads = 2;
    o.resident_threshold = 0;
    return o;
  }
  void ExpectColumns(const LoadResult& r) {
    ASSERT_EQ(r.tensors.size(), 2u);
    const auto want =
        testing::ReferenceGather(std::span<const std::byte>(weights_),
                                 {kRows, kCols}, 2, kColumns[0].slices);
    ASSERT_EQ(r.tensors[0].size, want.size());
    EXPECT_EQ(0, std::memcmp(r.tensors[0].data, want.data(), want.size()));
    ASSERT_EQ(r.tensors[1].size, norm_.size());
    EXPECT_EQ(0, std::memcmp(r.tensors[1].data, norm_.data(), norm_.size()));
  }
  // A row-parallel part: 640 of each row's 1024 columns (more than half
  // the file, so auto samples it rather than reading it as a small part),
  // and a replicated tensor.
  const std::vector<TensorRequest> kColumns = {
      {"w", {{0, kRows, 1}, {0, 640, 1}}}, {"norm", {}}};
  TempDir dir_;
  std::string path_;
  std::vector<std::byte> weights_, norm_;
  std::unique_ptr<Checkpoint> ckpt_;
};

TEST_F(WarmRowPagesTest, TheLoadTakesTheFilledMappingOnceAndSaysSo) {
  auto warmed = WarmRowPages(*ckpt_, kColumns, 0.0);
  ASSERT_TRUE(warmed.ok()) << warmed.status().ToString();
  EXPECT_EQ(warmed->files, 1u);
  EXPECT_EQ(warmed->runs, kRows);  // the replicated tensor is one read
  EXPECT_EQ(warmed->bytes, kRows * 640 * 2);
  EXPECT_TRUE(warmed->skipped.empty());
  WarmMappings& warm = HeldFiles::Warm(*ckpt_);
  warm.Wait();
  EXPECT_TRUE(warm.Holds(0));

  auto loader = CreateHostLoader(Options());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->LoadSlices(*ckpt_, kColumns);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectColumns(*r);
  ASSERT_EQ(r->report.files.size(), 1u);
  EXPECT_NE(r->report.files[0].reason.find(
                "whose pages prepare filled: 2048 of 2048 runs"),
            std::string::npos)
      << r->report.files[0].reason;
  EXPECT_EQ(r->report.files[0].copied_row_runs, kRows);
  EXPECT_FALSE(warm.Holds(0));

  // One load's: the next maps the file itself.
  auto again = (*loader)->LoadSlices(*ckpt_, kColumns);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ExpectColumns(*again);
  EXPECT_EQ(again->report.files[0].reason.find("prepare filled"),
            std::string::npos)
      << again->report.files[0].reason;
  EXPECT_NE(again->report.files[0].reason.find("copies from a mapping"),
            std::string::npos)
      << again->report.files[0].reason;
}

TEST_F(WarmRowPagesTest, ALoadThroughAnotherBackendLetsTheMappingGo) {
  ASSERT_TRUE(WarmRowPages(*ckpt_, kColumns, 0.0).ok());
  WarmMappings& warm = HeldFiles::Warm(*ckpt_);
  EXPECT_TRUE(warm.Holds(0));
  auto loader = CreateHostLoader(Options(Backend::kPread));
  ASSERT_TRUE(loader.ok());
  auto r = (*loader)->LoadSlices(*ckpt_, kColumns);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectColumns(*r);
  EXPECT_FALSE(warm.Holds(0));
  EXPECT_EQ(r->report.files[0].reason.find("prepare filled"),
            std::string::npos);
}

TEST_F(WarmRowPagesTest, LeavesAloneWhatTheLoadWouldNotCopyFromAMapping) {
  // Below the residency threshold (no file is 150% resident): the load
  // would read it with O_DIRECT, and filling would read it from storage.
  auto cold = WarmRowPages(*ckpt_, kColumns, 1.5);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->files, 0u);
  ASSERT_EQ(cold->skipped.size(), 1u);
  EXPECT_NE(cold->skipped[0].find(path_), std::string::npos);
  EXPECT_NE(cold->skipped[0].find("resident"), std::string::npos)
      << cold->skipped[0];
  EXPECT_FALSE(HeldFiles::Warm(*ckpt_).Holds(0));
  // Whole tensors and row ranges are single reads: no runs at all.
  const std::vector<TensorRequest> rows = {{"w", {{5, 900, 1}}}, {"norm", {}}};
  auto none = WarmRowPages(*ckpt_, rows, 0.0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->files, 0u);
  EXPECT_EQ(none->runs, 0u);
  EXPECT_TRUE(none->skipped.empty());
}

TEST_F(WarmRowPagesTest, BadRequestsAreTheLoadsErrors) {
  const std::vector<TensorRequest> missing = {{"nope", {}}};
  EXPECT_EQ(WarmRowPages(*ckpt_, missing, 0.0).status().code(),
            StatusCode::kNotFound);
  const std::vector<TensorRequest> past = {{"w", {{0, kRows + 1, 1}}}};
  EXPECT_EQ(WarmRowPages(*ckpt_, past, 0.0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(HeldFiles::Warm(*ckpt_).Holds(0));
}

}  // namespace
}  // namespace weightlift::internal
