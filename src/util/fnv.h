// FNV-1a, 64 bits, over bytes: the project's one non-cryptographic hash,
// for digests compared within a process or a group (what prepare made a
// load ready for, a group's plan fingerprint) and synthetic tensors' seeds.
// Not for anything an adversary chooses to collide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weightlift::internal {

inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;

struct Fnv {
  uint64_t h = kFnvOffsetBasis;  // another basis gives another hash

  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 0x100000001b3ull;
    }
  }
  void U64(uint64_t v) { Bytes(&v, sizeof v); }
  // The length, then the bytes: "ab" + "c" differs from "a" + "bc".
  void Str(std::string_view s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }
};

}  // namespace weightlift::internal
