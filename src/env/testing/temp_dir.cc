#include "env/testing/temp_dir.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weightlift::internal::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/wl_test_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::byte> RandomBytes(size_t n, uint64_t seed) {
  std::vector<std::byte> out(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<std::byte>(rng());
  return out;
}

void WriteFileOrDie(const std::string& path,
                    const std::vector<std::byte>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  // An empty vector's data() may be null, which fwrite must not be given
  // (its pointer argument is declared nonnull; UBSan reports it).
  if (f == nullptr ||
      (!bytes.empty() &&
       std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

std::vector<std::byte> ReadFileOrDie(const std::string& path) {
  // One fread of the whole file, not a byte-at-a-time stream iterator: tests
  // call this per tensor, and under the sanitizers that was minutes.
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr || std::fseek(f, 0, SEEK_END) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  const long size = std::ftell(f);
  std::vector<std::byte> out(size > 0 ? static_cast<size_t>(size) : 0);
  if (size < 0 || std::fseek(f, 0, SEEK_SET) != 0 ||
      (!out.empty() &&
       std::fread(out.data(), 1, out.size(), f) != out.size()) ||
      std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return out;
}

}  // namespace weightlift::internal::testing
