// FileMapping on real files in a temp dir (no GPU).
#include "cuda/file_mapping.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace weightlift::internal {
namespace {

class FileMappingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("wl_file_mapping_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(FileMappingTest, MapsTheWholeFileAndMoves) {
  std::string path = Write("a.bin", "hello, mapping");
  auto m = FileMapping::Map(path, 14);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_NE(m->data(), nullptr);
  EXPECT_EQ(m->size(), 14u);
  EXPECT_EQ(std::memcmp(m->data(), "hello, mapping", 14), 0);
  FileMapping moved = std::move(m).value();
  EXPECT_EQ(std::memcmp(moved.data(), "hello", 5), 0);
  FileMapping other;
  other = std::move(moved);
  EXPECT_EQ(moved.data(), nullptr);
  EXPECT_EQ(other.size(), 14u);
}

TEST_F(FileMappingTest, EmptyFileMapsToNull) {
  std::string path = Write("empty.bin", "");
  auto m = FileMapping::Map(path, 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->data(), nullptr);
}

TEST_F(FileMappingTest, SizeChangedIsIoErrorNamingBothSizes) {
  std::string path = Write("b.bin", "12345");
  auto m = FileMapping::Map(path, 9);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
  EXPECT_NE(m.status().message().find(path), std::string::npos);
  EXPECT_NE(m.status().message().find("now 5 bytes, expected 9"),
            std::string::npos)
      << m.status().ToString();
}

TEST_F(FileMappingTest, MissingFileIsIoErrorWithErrno) {
  auto m = FileMapping::Map((dir_ / "nope").string(), 1);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIoError);
  EXPECT_NE(m.status().message().find("open for host-register"),
            std::string::npos);
  EXPECT_NE(m.status().message().find("ENOENT"), std::string::npos)
      << m.status().ToString();
}

}  // namespace
}  // namespace weightlift::internal
