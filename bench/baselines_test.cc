#include "baselines.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_runner.h"
#include "cuda/device_available.h"
#include "device_baselines.h"
#include "format/synth.h"

namespace weightlift::bench {
namespace {

class BaselinesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // On the build tree's file system (not tmpfs): O_DIRECT and eviction
    // must work for the ceilings.
    dir_ = new std::string(std::filesystem::current_path().string() +
                           "/baselines-test-" + std::to_string(::getpid()));
    ASSERT_TRUE(internal::Synthesize("tiny", 2, *dir_, 3).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static Checkpoint Open() {
    StatusOr<Checkpoint> c = Checkpoint::Open(*dir_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
  static std::string* dir_;
};
std::string* BaselinesTest::dir_ = nullptr;

uint64_t FileBytes(const Checkpoint& c) {
  uint64_t n = 0;
  for (const FileInfo& f : c.files()) n += f.size;
  return n;
}

TEST_F(BaselinesTest, NaiveLoadersMoveEveryTensorByte) {
  const Checkpoint c = Open();
  StatusOr<Timing> m = NaiveMmapCopy(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->bytes, c.total_bytes());
  EXPECT_GT(m->seconds, 0);
  StatusOr<Timing> p = NaivePreadOneThread(c);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->bytes, c.total_bytes());
  EXPECT_GT(p->gb_per_s(), 0);
}

TEST_F(BaselinesTest, EvictThenWarm) {
  const Checkpoint c = Open();
  struct statfs sf;
  if (::statfs(dir_->c_str(), &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
    GTEST_SKIP() << "tmpfs keeps its pages: nothing to evict";
  }
  StatusOr<double> after = EvictCheckpoint(c);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_LT(*after, 0.5);  // ext4/xfs drop clean unmapped pages
  ASSERT_TRUE(WarmCheckpoint(c).ok());
  StatusOr<double> warm = ResidentFraction(c);
  ASSERT_TRUE(warm.ok());
  EXPECT_GT(*warm, 0.9);
}

TEST_F(BaselinesTest, CeilingsReadWholeFiles) {
  const Checkpoint c = Open();
  struct statfs sf;
  if (::statfs(dir_->c_str(), &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
    GTEST_SKIP() << "tmpfs refuses O_DIRECT";
  }
  StatusOr<Timing> s = StorageCeiling(c);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->bytes, FileBytes(c));
  EXPECT_FALSE(s->method.empty());
  StatusOr<Timing> p = PageCacheCeiling(c, 2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->bytes, FileBytes(c));
}

TEST_F(BaselinesTest, SequentialReadIntoCopiesTheFilesInOrder) {
  const Checkpoint c = Open();
  const uint64_t n = FileBytes(c);
  std::vector<std::byte> dst(n + 7, std::byte{0x77});
  StatusOr<Timing> t = SequentialReadInto(c, dst.data(), dst.size());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->bytes, n);
  // The files, one after the other, byte for byte; nothing written past.
  uint64_t at = 0;
  for (const std::string& path : CheckpointFiles(c)) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr) << path;
    std::vector<std::byte> want(std::filesystem::file_size(path));
    ASSERT_EQ(std::fread(want.data(), 1, want.size(), f), want.size());
    std::fclose(f);
    ASSERT_EQ(std::memcmp(dst.data() + at, want.data(), want.size()), 0)
        << path;
    at += want.size();
  }
  EXPECT_EQ(dst[n], std::byte{0x77});
  // One byte too small: refused with the reason, not a write past the end.
  StatusOr<Timing> small = SequentialReadInto(c, dst.data(), n - 1);
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("smaller than the files"),
            std::string::npos);
}

TEST_F(BaselinesTest, SequentialReadFreshReadsWholeFilesAndNamesAMissingOne) {
  const Checkpoint c = Open();
  StatusOr<Timing> t = SequentialReadFresh(c);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->bytes, FileBytes(c));
  EXPECT_GT(t->seconds, 0);
  EXPECT_NE(t->method.find("new buffer per file"), std::string::npos);

  // A file gone after the checkpoint was opened: the error names it.
  const std::string copy = *dir_ + "-fresh-copy";
  std::filesystem::remove_all(copy);
  std::filesystem::copy(*dir_, copy);
  StatusOr<Checkpoint> opened = Checkpoint::Open(copy);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const std::string gone = CheckpointFiles(*opened).back();
  std::filesystem::remove(gone);
  StatusOr<Timing> missing = SequentialReadFresh(*opened);
  std::filesystem::remove_all(copy);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(gone), std::string::npos)
      << missing.status().ToString();
}

TEST_F(BaselinesTest, RunBenchCpuRowsAndRatios) {
  const Checkpoint c = Open();
  BenchOptions o;
  o.repeat = 2;
  int steps = 0;
  o.on_step = [&](const std::string&) { ++steps; };
  StatusOr<BenchReport> r = RunBench("tiny", c, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const char* id : {kLoader, kNaiveMmap, kNaivePread}) {
    for (Mode m : {Mode::kCold, Mode::kWarm}) {
      const Measurement* row = r->Find(id, m);
      ASSERT_NE(row, nullptr) << id << " " << ModeName(m);
      EXPECT_EQ(row->seconds.size(), 2u);
      EXPECT_EQ(row->bytes, c.total_bytes());
      EXPECT_GT(r->Ratio(id, m), 0);
    }
  }
  EXPECT_NE(r->Find(kStorageCeiling, Mode::kCold), nullptr);
  EXPECT_NE(r->Find(kPageCacheCeiling, Mode::kWarm), nullptr);
  EXPECT_EQ(r->Find(kPinnedCopy, Mode::kCold), nullptr);  // cpu: none
  // Host: LoadInto into touched memory, cold and warm, and the sequential
  // read it is compared with (warm).
  ASSERT_NE(r->Find(kLoaderInto, Mode::kCold), nullptr);
  ASSERT_NE(r->Find(kLoaderInto, Mode::kWarm), nullptr);
  ASSERT_NE(r->Find(kSequentialInto, Mode::kWarm), nullptr);
  EXPECT_EQ(r->Find(kSequentialInto, Mode::kWarm)->bytes, FileBytes(c));
  EXPECT_GT(r->RatioOf(kLoaderInto, kSequentialInto, Mode::kWarm), 0);
  // Load()'s own warm reference: the files read into new memory.
  ASSERT_NE(r->Find(kSequentialFresh, Mode::kWarm), nullptr);
  EXPECT_EQ(r->Find(kSequentialFresh, Mode::kCold), nullptr);
  EXPECT_EQ(r->Find(kSequentialFresh, Mode::kWarm)->bytes, FileBytes(c));
  EXPECT_GT(r->Ratio(kSequentialFresh, Mode::kWarm), 0);
  EXPECT_DOUBLE_EQ(r->Ratio(kLoader, Mode::kCold), 1.0);
  EXPECT_TRUE(r->have_cold_report && r->have_warm_report);
  EXPECT_EQ(r->cold_report.bytes, c.total_bytes());
  EXPECT_GT(steps, 8);
  EXPECT_GT(r->peak_rss_end, 0u);
  const std::string table = r->ToTable();
  EXPECT_NE(table.find("loader / naive mmap + copy"), std::string::npos);
  EXPECT_NE(table.find("LoadInto / (storage | sequential read)"),
            std::string::npos);
  EXPECT_NE(r->ToJson().find("\"naive_pread\""), std::string::npos);
  EXPECT_NE(table.find("loader / sequential read into fresh memory"),
            std::string::npos);
  const std::string json = r->ToJson();
  EXPECT_NE(json.find("\"sequential_read_into_fresh\": "), std::string::npos);
  EXPECT_NE(json.find("\"loader_into_touched_over_its_reference\": "),
            std::string::npos);
}

TEST(Measurement, MedianAndBest) {
  Measurement m;
  m.bytes = 1'000'000'000;
  m.seconds = {4.0, 1.0, 2.0};
  EXPECT_DOUBLE_EQ(m.median_gbps(), 0.5);
  EXPECT_DOUBLE_EQ(m.best_gbps(), 1.0);
  m.seconds = {1.0, 4.0};
  EXPECT_DOUBLE_EQ(m.median_gbps(), 0.4);
}

// Without a usable device the device-side baselines fail with the reason
// (no CUDA in the build, no driver, no device) instead of timing nothing.
// On a GPU machine gpu_tests runs them (CudaBaselinesGpu).
TEST_F(BaselinesTest, DeviceBaselinesWithoutDeviceSayWhy) {
  std::string why;
  if (internal::CudaDeviceAvailable(0, &why)) {
    GTEST_SKIP() << "a CUDA device is present; gpu_tests runs the baselines";
  }
  EXPECT_FALSE(why.empty());
  auto gbps = MeasurePinnedCopyGBps(0, 64ull << 20);
  ASSERT_FALSE(gbps.ok());
  EXPECT_FALSE(gbps.status().message().empty());
  auto ckpt = Checkpoint::Open(*dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  auto secs = NaiveMmapToDevice(*ckpt, 0);
  ASSERT_FALSE(secs.ok());
  EXPECT_FALSE(secs.status().message().empty());
}

}  // namespace
}  // namespace weightlift::bench
