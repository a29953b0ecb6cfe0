// Helpers shared by the format tests: file images (TempDir is the one of
// env/testing/temp_dir.h).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include "env/testing/temp_dir.h"

namespace weightlift::internal::testing {

inline std::string U64Le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

// A file image: prefix N = HEADER.size() (or N_OVERRIDE), HEADER, then
// DATA_BYTES bytes of 0xAB.
inline std::string Image(std::string_view header, uint64_t data_bytes = 0) {
  return U64Le(header.size()) + std::string(header) +
         std::string(data_bytes, '\xAB');
}

inline std::span<const std::byte> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

inline void WriteFile(const std::string& path, std::string_view contents) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(f.good()) << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace weightlift::internal::testing
