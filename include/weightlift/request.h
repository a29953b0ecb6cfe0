// TensorRequest: what a load asks for, a whole tensor or a slice of one.
//
//   std::vector<weightlift::TensorRequest> req = {
//       {"model.embed.weight", {}},                  // the whole tensor
//       {"layers.0.mlp.up.weight", {{0, 2048, 1}}},  // rows [0, 2048)
//       {"layers.0.mlp.down.weight", {{0, 4096, 1}, {0, 5504, 1}}},  // columns
//   };
//   auto result = loader->LoadSlices(ckpt, req);
//
// A slice is numpy basic indexing with every index already normalized (as
// Python's slice.indices() gives it, then clamped): per dimension a start,
// a stop and a step, start <= stop <= dim, step >= 1. Dimensions after the
// last DimSlice are taken whole. The result has one dimension per tensor
// dimension (an integer index is the slice {i, i + 1, 1}; dropping the axis
// is a reshape the caller does) and is C-contiguous.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weightlift {

// Elements start, start + step, ... below stop of one dimension.
struct DimSlice {
  uint64_t start = 0;
  uint64_t stop = 0;
  uint64_t step = 1;
  // ceil((stop - start) / step); 0 when stop <= start. Written so that no
  // step (up to 2^64 - 1) wraps the sum: range(1, 5, 2**64 - 1) has one.
  uint64_t count() const {
    return stop > start ? (stop - start - 1) / step + 1 : 0;
  }
  bool operator==(const DimSlice&) const = default;
};

struct TensorRequest {
  std::string name;
  // Empty: the whole tensor. Otherwise at most one per dimension; checked
  // by the loader (InvalidArgument naming the tensor, the dimension and the
  // bounds). Sub-byte dtypes (F4, F6_*) can only be loaded whole.
  std::vector<DimSlice> slices;
};

}  // namespace weightlift
