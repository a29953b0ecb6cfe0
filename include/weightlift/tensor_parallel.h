// Tensor-parallel shard rule: which part of each tensor rank r of n loads.
//
//   weightlift::TensorParallel tp;
//   tp.rank = 1; tp.size = 4;
//   tp.plan = {{"*.q_proj.weight", ShardStyle::kColwise},
//              {"*.o_proj.weight", ShardStyle::kRowwise}};
//   auto shards = weightlift::ShardTensors(ckpt.tensors(), tp);
//
// The words are transformers' tp_plan words; a plan is an ordered list of
// glob patterns (Python's fnmatch.fnmatchcase over the full tensor name,
// whatever the locale; first match wins):
//   colwise    splits dim 0 (a Linear's output features, and its bias)
//   rowwise    splits the last dim of tensors with 2 or more dims; a 1-D or
//              0-D tensor under rowwise is replicated (a row-parallel bias)
//   replicate  every rank loads the whole tensor
// A name no pattern matches is replicated. Parts are those of
// torch.tensor_split(t, n, dim): the first size % n parts are one longer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/request.h"
#include "weightlift/status.h"

namespace weightlift {

enum class ShardStyle : uint8_t { kReplicate, kColwise, kRowwise };

// "replicate", "colwise", "rowwise".
std::string_view ShardStyleName(ShardStyle style);
// The three words above; InvalidArgument naming the word otherwise.
StatusOr<ShardStyle> ParseShardStyle(std::string_view word);

struct TpPlanEntry {
  std::string pattern;  // fnmatch glob over the full tensor name
  ShardStyle style = ShardStyle::kReplicate;
};

// The largest tp_size accepted: far beyond any tensor-parallel group, and
// small enough that checking every rank's part boundaries stays quick.
inline constexpr int kMaxTpSize = 1 << 16;

struct TensorParallel {
  int rank = 0;
  int size = 1;                   // 1: every tensor whole
  std::vector<TpPlanEntry> plan;  // first match wins

  // InvalidArgument when size < 1 or size > kMaxTpSize, rank < 0 or
  // rank >= size, or a pattern is empty.
  Status Validate() const;
};

// One tensor's part for one rank: elements [start, stop) of dimension
// `dim`, every other dimension whole. A replicated tensor has dim == -1 and
// covers everything.
struct TensorShard {
  uint32_t tensor = 0;  // index into the tensors given to ShardTensors
  ShardStyle style = ShardStyle::kReplicate;  // what was applied (a 1-D
                                              // rowwise tensor: kReplicate)
  int dim = -1;
  uint64_t start = 0;
  uint64_t stop = 0;
  std::vector<uint64_t> shape;  // the part's shape
  uint64_t bytes = 0;           // the part's bytes
  // Contiguous runs of the part in the tensor's bytes: 1 for replicated and
  // dim-0 parts; rows of the leading dims for a last-dim part.
  uint64_t runs = 0;
  uint64_t run_bytes = 0;   // bytes per run
  uint64_t run_stride = 0;  // bytes from one run's start to the next's
  uint64_t first_byte = 0;  // the first run's offset within the tensor
  bool is_split() const { return dim >= 0; }
};

struct ShardedTensors {
  std::vector<TensorShard> shards;  // one per tensor, in the given order
  uint64_t split_bytes = 0;         // this rank's bytes of split tensors
  uint64_t replicated_bytes = 0;    // bytes of tensors every rank loads
  // Not errors: one line per plan pattern that matched no tensor (or only
  // tensors an earlier pattern took), and one when TP splits nothing at
  // all (an empty plan, or one that matches no weight): every rank then
  // loads the whole checkpoint.
  std::vector<std::string> warnings;
};

// Applies TP to TENSORS (usually ckpt.tensors()). InvalidArgument for a bad
// TP (see Validate); Unsupported when a split would cut a byte of a
// sub-byte dtype (F4, F6) in two, naming the tensor.
StatusOr<ShardedTensors> ShardTensors(std::span<const TensorInfo> tensors,
                                      const TensorParallel& tp);

// SHARDS (from ShardTensors(TENSORS, tp)) as the request of a load:
// Loader::LoadSlices(ckpt, ShardRequests(ckpt.tensors(), *shards)) gives
// rank r's parts (and the replicated tensors whole), in TENSORS' order.
std::vector<TensorRequest> ShardRequests(std::span<const TensorInfo> tensors,
                                         const ShardedTensors& shards);

// The plan's first pattern matching NAME, or nullptr. Patterns mean what
// they mean to Python's fnmatch.fnmatchcase: '*', '?' (one character of
// UTF-8), '[set]' with '!' to negate and ranges; no escape character; '*'
// also matches '.' and '/'; the same answer in every locale.
const TpPlanEntry* MatchPlan(std::span<const TpPlanEntry> plan,
                             std::string_view name);

// Part R of N of a dimension of LENGTH, as torch.tensor_split: [start, stop).
struct SplitRange {
  uint64_t start = 0;
  uint64_t stop = 0;
};
SplitRange TensorSplitRange(uint64_t length, int n, int r);

}  // namespace weightlift
