// DType: every element type of the current safetensors specification.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace weightlift {

enum class DType : uint8_t {
  kBool,
  kF4,       // fp4 e2m1, two per byte
  kF6_E2M3,  // fp6, four per three bytes
  kF6_E3M2,
  kU8,
  kI8,
  kF8_E5M2,
  kF8_E4M3,
  kF8_E8M0,
  kF8_E4M3FNUZ,
  kF8_E5M2FNUZ,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kC64,
  kF64,
  kI64,
  kU64,
};

inline constexpr int kNumDTypes = 22;

// Size of one element in bits (4 for F4, 6 for F6_*, 8 for BOOL).
int DTypeBits(DType d);
// The spec's spelling: "BF16", "F8_E4M3", ...
std::string_view DTypeName(DType d);
// Parses the spec's spelling; nullopt for anything else (case-sensitive).
std::optional<DType> ParseDType(std::string_view name);

}  // namespace weightlift
