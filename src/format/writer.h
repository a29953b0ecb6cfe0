// Writing safetensors files and sharded checkpoints.
//
// Output follows the reference writer: tensors ordered by dtype (widest
// first, the enum order of dtype.h reversed) then by name, offsets packed
// from 0, the header padded with spaces so the data starts at a multiple of
// 8. Data is streamed through a bounded buffer (16 MiB by default, flushed by
// a second thread while the next piece is produced), so multi-GB files cost
// bounded memory and big sequential writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "weightlift/dtype.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Fills OUT with the tensor's bytes [offset_in_tensor, offset_in_tensor +
// out.size()). Called in increasing offset order, pieces of any size.
using TensorGenerator =
    std::function<void(uint64_t offset_in_tensor, std::span<std::byte> out)>;

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<uint64_t> shape;
  // The bytes: DATA when GENERATE is empty. Must be exactly the tensor's size.
  std::span<const std::byte> data;
  TensorGenerator generate;
};

struct WriteOptions {
  std::map<std::string, std::string> metadata;  // __metadata__; omitted if {}
  bool pad_header = true;                  // false: N is the exact JSON length
  bool reference_order = true;             // false: keep the order given
  size_t buffer_bytes = size_t{16} << 20;  // each write(); at least 8 MiB
};

// The header JSON (without the 8-byte prefix) for TENSORS in the order given,
// packed from offset 0. InvalidArgument for an empty, duplicate, non-UTF-8 or
// "__metadata__" name, or a size that overflows.
StatusOr<std::string> BuildHeaderJson(const std::vector<TensorToWrite>& tensors,
                                      const WriteOptions& options);

// TENSORS sorted as the reference writer sorts them.
void SortLikeReference(std::vector<TensorToWrite>* tensors);

// Writes PATH (through PATH.tmp, renamed at the end). Fails with
// InvalidArgument for bad input (see BuildHeaderJson; DATA of the wrong size)
// and IoError naming the path, offset and errno.
Status WriteSafetensors(const std::string& path,
                        std::vector<TensorToWrite> tensors,
                        const WriteOptions& options = {});

// "model-00002-of-00005.safetensors" for K = 2 (1-based), N = 5.
std::string ShardFileName(int k, int n);

// Writes SHARDS[i] to DIR/ShardFileName(i + 1, SHARDS.size()) and
// DIR/model.safetensors.index.json with the weight_map and
// metadata.total_size (the sum of tensor bytes), as Hugging Face does.
// OPTIONS.metadata goes into every shard's __metadata__. DIR must exist.
Status WriteShardedCheckpoint(const std::string& dir,
                              std::vector<std::vector<TensorToWrite>> shards,
                              const WriteOptions& options = {});

}  // namespace weightlift::internal
