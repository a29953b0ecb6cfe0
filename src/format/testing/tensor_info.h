// A TensorInfo for tests that plan or shard tensors without a file: its
// name, dtype, shape and offset, and the size those imply.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/dtype.h"

namespace weightlift::internal::testing {

inline TensorInfo Tensor(std::string name, std::vector<uint64_t> shape,
                         DType dtype = DType::kBF16, uint64_t offset = 0) {
  TensorInfo t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.offset = offset;
  uint64_t elems = 1;
  for (uint64_t d : t.shape) elems *= d;
  t.size = elems * static_cast<uint64_t>(DTypeBits(dtype)) / 8;
  return t;
}

}  // namespace weightlift::internal::testing
