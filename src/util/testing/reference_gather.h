// Tests: the reference a slice load is checked against.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weightlift/request.h"

namespace weightlift::internal::testing {

// numpy's basic indexing of a row-major tensor, the plain way: the elements
// SLICES select from TENSOR (its bytes; SHAPE; ELEM_BYTES bytes an element),
// in row-major order. Dimensions past SLICES are taken whole. BYTE is
// uint8_t or std::byte, whichever the caller holds the file's bytes in.
template <typename Byte>
std::vector<Byte> ReferenceGather(std::span<const Byte> tensor,
                                  const std::vector<uint64_t>& shape,
                                  int elem_bytes,
                                  const std::vector<DimSlice>& slices) {
  std::vector<Byte> out;
  const size_t n = shape.size();
  std::vector<DimSlice> s(n);
  for (size_t i = 0; i < n; ++i) {
    s[i] = i < slices.size() ? slices[i] : DimSlice{0, shape[i], 1};
    if (s[i].count() == 0) return out;
  }
  std::vector<uint64_t> idx(n, 0);
  while (true) {
    uint64_t e = 0;
    for (size_t i = 0; i < n; ++i) {
      e = e * shape[i] + s[i].start + idx[i] * s[i].step;
    }
    out.insert(out.end(), tensor.begin() + e * elem_bytes,
               tensor.begin() + (e + 1) * elem_bytes);
    size_t d = n;
    while (d > 0 && ++idx[d - 1] == s[d - 1].count()) idx[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

}  // namespace weightlift::internal::testing
