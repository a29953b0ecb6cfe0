// File::ReadRows: the default (one ReadAt per run), the copies out of a
// populated mapping (WithRowsFromMapping, the mmap backend), on real files,
// against the file's bytes; a file that shrank is an IoError, not a SIGBUS;
// faults of a wrapping FaultInjectingFile still reach every run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "env/env.h"
#include "env/fault_file.h"
#include "env/mapped_rows_file.h"
#include "env/testing/temp_dir.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFileOrDie;

// The runs as the file holds them, packed back to back.
std::vector<std::byte> Expected(const std::vector<std::byte>& file,
                                uint64_t offset, uint64_t pitch, uint64_t width,
                                uint64_t rows) {
  std::vector<std::byte> out(rows * width);
  for (uint64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * width, file.data() + offset + r * pitch,
                width);
  }
  return out;
}

struct Shape {
  uint64_t offset, pitch, width, rows;
};

// Row runs like a Llama part's (1-2.75 KB of 8-22 KB rows: dense and
// sparse, see kSparseRunGapBytes), unaligned starts, a run ending at the
// last byte, and pitches on both sides of kMappedRowsMaxPitch.
const Shape kShapes[] = {
    {0, 8192, 1024, 64},
    {4097, 22016, 2752, 40},
    {13, 300, 7, 1000},
    {1 << 20, 4096, 4096, 16},
    {0, 80000, 100, 20},
    {3, kMappedRowsMaxPitch, 33, 9},
    {(2 << 20) - 1000, 500, 100, 2},
};

class MappedRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("rows.bin");
    bytes_ = RandomBytes(2 << 20, 11);
    WriteFileOrDie(path_, bytes_);
  }
  std::unique_ptr<File> OpenOrDie(Backend b) {
    auto f = OpenFile(path_, b);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return std::move(f).value();
  }
  void CheckShapes(File& f) {
    for (const Shape& s : kShapes) {
      std::vector<std::byte> got(s.rows * s.width, std::byte{0x5a});
      Status st = f.ReadRows(s.offset, s.pitch, s.width, s.rows, got.data());
      ASSERT_TRUE(st.ok()) << st.ToString() << " offset " << s.offset;
      EXPECT_EQ(got, Expected(bytes_, s.offset, s.pitch, s.width, s.rows))
          << "offset " << s.offset << " pitch " << s.pitch;
    }
  }

  TempDir dir_;
  std::string path_;
  std::vector<std::byte> bytes_;
};

TEST_F(MappedRowsTest, DefaultReadsEveryRunOfEveryBackend) {
  for (Backend b : {Backend::kPread, Backend::kMmap}) {
    SCOPED_TRACE(std::string(BackendName(b)));
    auto f = OpenOrDie(b);
    CheckShapes(*f);
  }
}

TEST_F(MappedRowsTest, CopiesDenseRunsFromAMappingAndSaysSo) {
  auto f = WithRowsFromMapping(OpenOrDie(Backend::kPread));
  EXPECT_EQ(f->backend_name(), "pread");
  EXPECT_EQ(f->copied_rows().runs, 0u);
  CheckShapes(*f);
  // Every shape but the 80000-byte pitch went through the mapping.
  uint64_t runs = 0, calls = 0;
  for (const Shape& s : kShapes) {
    if (s.pitch <= kMappedRowsMaxPitch) runs += s.rows, ++calls;
  }
  EXPECT_EQ(f->copied_rows().runs, runs);
  EXPECT_EQ(f->copied_rows().reads, calls);
  // Copying from the mapping is the file's way, not a fallback.
  EXPECT_EQ(f->Degraded(), "");
  // Plain reads are the base's.
  std::vector<std::byte> got(100);
  ASSERT_TRUE(f->ReadAt(77, got).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), bytes_.data() + 77, 100));
}

TEST_F(MappedRowsTest, RunsPastTheEndAreTheBasesErrorNamingTheRun) {
  auto f = WithRowsFromMapping(OpenOrDie(Backend::kPread));
  std::vector<std::byte> got(4 * 1000);
  Status s = f->ReadRows(bytes_.size() - 2500, 1000, 1000, 4, got.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(bytes_.size() - 500)),
            std::string::npos)
      << s.ToString();
}

// A file truncated after it was opened: the populate finds the pages gone
// and the read is an IoError naming the file and range (no SIGBUS), for
// dense runs (one populate of the covering range) and sparse ones (one per
// run, kSparseRunGapBytes).
TEST_F(MappedRowsTest, FileThatShrankIsAnIoErrorNotASigbus) {
  for (auto [mmap_backend, pitch] :
       {std::pair{false, 8192}, std::pair{true, 8192}, std::pair{false, 20000},
        std::pair{true, 20000}}) {
    SCOPED_TRACE(std::string(mmap_backend ? "mmap" : "pread + mapping") +
                 " pitch " + std::to_string(pitch));
    WriteFileOrDie(path_, bytes_);
    auto f = mmap_backend ? OpenOrDie(Backend::kMmap)
                          : WithRowsFromMapping(OpenOrDie(Backend::kPread));
    ASSERT_EQ(0, ::truncate(path_.c_str(), 1 << 20));
    std::vector<std::byte> got(48 * 1024);
    Status s = f->ReadRows((1 << 20) + 8192, pitch, 1024, 48, got.data());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
    EXPECT_NE(s.message().find("shrank"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(path_), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("offset " + std::to_string((1 << 20) + 8192)),
              std::string::npos)
        << s.ToString();
  }
}

// Tests' faults wrap the File a loader opened (FaultInjectingFile over the
// mapped-rows file): its default ReadRows reads each run through its own
// ReadAt, so an injected EIO still fails the read at its run.
TEST_F(MappedRowsTest, FaultsOfAWrappingFileReachEveryRun) {
  FileFaults faults;
  faults.eio_offset = 8192 * 5 + 10;
  FaultInjectingFile f(WithRowsFromMapping(OpenOrDie(Backend::kPread)), faults);
  std::vector<std::byte> got(64 * 1024);
  Status s = f.ReadRows(0, 8192, 1024, 64, got.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("offset " + std::to_string(8192 * 5)),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(f.reads(), 6u);
}

}  // namespace
}  // namespace weightlift::internal
