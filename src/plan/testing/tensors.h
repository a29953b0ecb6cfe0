// Test tensors for the planner's tests: only shape, size and offset matter.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "weightlift/checkpoint.h"

namespace weightlift::internal::testing {

// A tensor named "w" of SHAPE with ELEM_BYTES-byte elements at OFFSET of
// file 0.
inline TensorInfo Tensor(std::vector<uint64_t> shape, int elem_bytes,
                         uint64_t offset) {
  TensorInfo t;
  t.name = "w";
  t.dtype = DType::kU8;  // only the element size matters here
  t.shape = std::move(shape);
  t.offset = offset;
  t.size = static_cast<uint64_t>(elem_bytes);
  for (uint64_t d : t.shape) t.size *= d;
  return t;
}

}  // namespace weightlift::internal::testing
