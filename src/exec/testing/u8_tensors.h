// Tests: a checkpoint's tensors made of byte vectors, one 1-D U8 tensor
// each, for tests whose subject is the loading rather than the dtypes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "format/writer.h"

namespace weightlift::internal::testing {

// Tensor i is PREFIX + i, U8, shape {DATA[i].size()}, its bytes DATA[i]
// (borrowed: DATA must outlive the writing).
inline std::vector<TensorToWrite> U8Tensors(
    const std::string& prefix,
    const std::vector<std::vector<std::byte>>& data) {
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < data.size(); ++i) {
    TensorToWrite t;
    t.name = prefix + std::to_string(i);
    t.dtype = DType::kU8;
    t.shape = {data[i].size()};
    t.data = data[i];
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace weightlift::internal::testing
