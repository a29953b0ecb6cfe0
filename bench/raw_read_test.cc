// The storage ceilings of the benchmarks (raw_read.h) on real files.
#include "raw_read.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "env/testing/temp_dir.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFileOrDie;

TEST(RawReadTest, ReadsEveryByteOfEveryFile) {
  TempDir dir;
  std::vector<std::string> paths = {dir.File("a"), dir.File("b")};
  WriteFileOrDie(paths[0], RandomBytes(3 << 20, 1));
  WriteFileOrDie(paths[1], RandomBytes((1 << 20) + 4097, 2));
  RawReadOptions o;
  o.block_bytes = 256 << 10;
  auto d = RawDirectRead(paths, o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->bytes, (4u << 20) + 4097);
  EXPECT_GT(d->seconds, 0);
  EXPECT_FALSE(d->method.empty());
  o.threads = 2;
  auto b = RawBufferedRead(paths, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->bytes, (4u << 20) + 4097);
  EXPECT_EQ(RawDirectRead(std::vector<std::string>{dir.File("nope")}, o)
                .status()
                .code(),
            StatusCode::kNotFound);
}

// Counts this process's open file descriptors.
int OpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// A failure after the io_uring ring exists (here: the buffer arena cannot be
// allocated) must not leak the ring's descriptor.
TEST(RawReadTest, AllocationFailureLeaksNoDescriptor) {
  TempDir dir;
  std::vector<std::string> paths = {dir.File("a")};
  WriteFileOrDie(paths[0], RandomBytes(8192, 3));
  RawReadOptions o;
  o.block_bytes = uint64_t{1} << 44;  // x queue depth: far beyond memory
  const int before = OpenFds();
  auto d = RawDirectRead(paths, o);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
}  // namespace weightlift::internal
