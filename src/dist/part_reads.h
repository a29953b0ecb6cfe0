// Parts of tensors as something the loader reads: every contiguous run of a
// part becomes one tensor of a derived checkpoint over the same files, with
// its destination, so Loader::LoadInto reads exactly the parts' bytes
// through its usual staging. (Loader::LoadSlices, where a build has it,
// plans strided parts better; this needs nothing but LoadInto.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift::internal {

class PartReads {
 public:
  // Adds RUNS runs of RUN_BYTES of tensor T, the first FIRST_BYTE into it,
  // each RUN_STRIDE after the previous, landing back to back at DST. One
  // run keeps T's name and gets PART_SHAPE; several are U8 runs
  // "NAME#K". REQUIRES: calls in checkpoint order (file, offset).
  void Add(const TensorInfo& t, uint64_t first_byte, uint64_t runs,
           uint64_t run_bytes, uint64_t run_stride,
           std::vector<uint64_t> part_shape, uintptr_t dst);
  // SHARD of T (from ShardTensors) at DST.
  void AddShard(const TensorInfo& t, const TensorShard& shard, uintptr_t dst);

  bool empty() const { return tensors_.empty(); }
  uint64_t bytes() const { return bytes_; }
  // The derived checkpoint over FILES (the original checkpoint's).
  Checkpoint ToCheckpoint(const Checkpoint& original) const;
  // Where each derived tensor lands (LoadInto's destinations).
  std::vector<Destination> Destinations() const;

 private:
  std::vector<TensorInfo> tensors_;
  std::vector<uintptr_t> dsts_;
  uint64_t bytes_ = 0;
};

}  // namespace weightlift::internal
