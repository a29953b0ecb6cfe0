// Test helpers: a temporary directory removed at exit, and file writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace weightlift::internal::testing {

// A fresh directory under $TMPDIR (default /tmp, a real disk here so that
// O_DIRECT and io_uring run for real), removed recursively on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  std::string operator/(std::string_view name) const {
    return path_ + "/" + std::string(name);
  }

 private:
  std::string path_;
};

std::vector<std::byte> RandomBytes(size_t n, uint64_t seed);
// Writes BYTES to PATH (truncating); aborts the test on failure.
void WriteFileOrDie(const std::string& path,
                    const std::vector<std::byte>& bytes);
std::vector<std::byte> ReadFileOrDie(const std::string& path);

}  // namespace weightlift::internal::testing
