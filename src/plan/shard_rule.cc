// The tensor-parallel shard rule (include/weightlift/tensor_parallel.h):
// pure arithmetic over tensor shapes, no I/O.
#include <algorithm>
#include <string>
#include <vector>

#include "plan/glob_match.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift {

std::string_view ShardStyleName(ShardStyle style) {
  switch (style) {
    case ShardStyle::kReplicate:
      return "replicate";
    case ShardStyle::kColwise:
      return "colwise";
    case ShardStyle::kRowwise:
      return "rowwise";
  }
  return "?";
}

StatusOr<ShardStyle> ParseShardStyle(std::string_view word) {
  for (ShardStyle s :
       {ShardStyle::kReplicate, ShardStyle::kColwise, ShardStyle::kRowwise}) {
    if (word == ShardStyleName(s)) return s;
  }
  return Status::InvalidArgument("tp_plan: unknown word '" + std::string(word) +
                                 "' (expected colwise, rowwise or replicate)");
}

Status TensorParallel::Validate() const {
  if (size < 1) {
    return Status::InvalidArgument("tp_size must be at least 1, got " +
                                   std::to_string(size));
  }
  if (size > kMaxTpSize) {
    return Status::InvalidArgument("tp_size must be at most " +
                                   std::to_string(kMaxTpSize) + ", got " +
                                   std::to_string(size));
  }
  if (rank < 0 || rank >= size) {
    return Status::InvalidArgument(
        "tp_rank must be in [0, tp_size): got tp_rank " + std::to_string(rank) +
        " with tp_size " + std::to_string(size));
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].pattern.empty()) {
      return Status::InvalidArgument("tp_plan entry " + std::to_string(i) +
                                     " has an empty pattern");
    }
  }
  return Status::OK();
}

namespace {

// A plan's patterns compiled once: Python's fnmatch rules, whatever the
// process's locale (glob_match.h).
class PlanPatterns {
 public:
  explicit PlanPatterns(std::span<const TpPlanEntry> plan) {
    patterns_.reserve(plan.size());
    for (const TpPlanEntry& e : plan) patterns_.emplace_back(e.pattern);
  }
  // Index of the first pattern matching NAME (decoded), or -1.
  int First(std::span<const char32_t> name) const {
    for (size_t k = 0; k < patterns_.size(); ++k) {
      if (patterns_[k].MatchesChars(name)) return static_cast<int>(k);
    }
    return -1;
  }
  const internal::GlobPattern& operator[](size_t k) const {
    return patterns_[k];
  }

 private:
  std::vector<internal::GlobPattern> patterns_;
};

}  // namespace

const TpPlanEntry* MatchPlan(std::span<const TpPlanEntry> plan,
                             std::string_view name) {
  const int k = PlanPatterns(plan).First(internal::DecodeChars(name));
  return k < 0 ? nullptr : &plan[static_cast<size_t>(k)];
}

SplitRange TensorSplitRange(uint64_t length, int n, int r) {
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t ur = static_cast<uint64_t>(r);
  const uint64_t q = length / un;
  const uint64_t rem = length % un;
  const uint64_t start = ur * q + (ur < rem ? ur : rem);
  return {start, start + q + (ur < rem ? 1 : 0)};
}

namespace {

uint64_t Product(const std::vector<uint64_t>& shape, size_t from, size_t to) {
  uint64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}

TensorShard Replicated(uint32_t index, const TensorInfo& t) {
  TensorShard s;
  s.tensor = index;
  s.shape = t.shape;
  s.bytes = t.size;
  s.runs = t.size ? 1 : 0;
  s.run_bytes = t.size;
  s.run_stride = t.size;
  return s;
}

// The part of T along DIM for rank r of n. Element counts times bits cannot
// overflow: Checkpoint::Open checked the whole tensor's.
StatusOr<TensorShard> Split(uint32_t index, const TensorInfo& t,
                            ShardStyle style, size_t dim,
                            const TensorParallel& tp) {
  const uint64_t bits = static_cast<uint64_t>(DTypeBits(t.dtype));
  const SplitRange range = TensorSplitRange(t.shape[dim], tp.size, tp.rank);
  const uint64_t inner = Product(t.shape, dim + 1, t.shape.size());
  const uint64_t outer = Product(t.shape, 0, dim);
  const uint64_t row_bits = t.shape[dim] * inner * bits;
  const uint64_t first_bits = range.start * inner * bits;
  const uint64_t part_bits = (range.stop - range.start) * inner * bits;
  // Every rank's boundaries, not just this one's: all ranks of a group
  // must accept or refuse the same plan. A boundary is a multiple of
  // inner * bits, so only sub-byte slabs (F4, F6 with few inner elements)
  // need the ranks checked one by one.
  bool cuts_a_byte = row_bits % 8 != 0;
  const bool slab_is_bytes = inner * bits % 8 == 0;
  for (int r = 0; r < tp.size && !cuts_a_byte && !slab_is_bytes; ++r) {
    cuts_a_byte =
        TensorSplitRange(t.shape[dim], tp.size, r).start * inner * bits % 8 !=
        0;
  }
  if (cuts_a_byte) {
    return Status::Unsupported(
        "tp: tensor '" + t.name + "' (" + std::string(DTypeName(t.dtype)) +
        ") cannot be split " + std::string(ShardStyleName(style)) + " into " +
        std::to_string(tp.size) +
        " parts: a part boundary falls inside a byte");
  }
  TensorShard s;
  s.tensor = index;
  s.style = style;
  s.dim = static_cast<int>(dim);
  s.start = range.start;
  s.stop = range.stop;
  s.shape = t.shape;
  s.shape[dim] = range.stop - range.start;
  s.run_bytes = part_bits / 8;
  s.run_stride = row_bits / 8;
  s.first_byte = first_bits / 8;
  s.runs = s.run_bytes ? outer : 0;
  s.bytes = s.run_bytes * outer;
  if (s.runs > 1 && s.run_bytes == s.run_stride) {  // whole rows: one run
    s.run_bytes = s.bytes;
    s.run_stride = s.bytes;
    s.runs = 1;
  }
  return s;
}

}  // namespace

StatusOr<ShardedTensors> ShardTensors(std::span<const TensorInfo> tensors,
                                      const TensorParallel& tp) {
  WL_RETURN_IF_ERROR(tp.Validate());
  ShardedTensors out;
  out.shards.reserve(tensors.size());
  std::vector<bool> used(tp.plan.size(), false);
  const PlanPatterns patterns(tp.plan);  // compiled once, not per tensor
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    const uint32_t index = static_cast<uint32_t>(i);
    const int k = patterns.First(internal::DecodeChars(t.name));
    if (k >= 0) used[static_cast<size_t>(k)] = true;
    const ShardStyle style =
        k >= 0 ? tp.plan[static_cast<size_t>(k)].style : ShardStyle::kReplicate;
    const size_t rank = t.shape.size();
    TensorShard shard;
    if (style == ShardStyle::kColwise && rank >= 1) {
      WL_ASSIGN_OR_RETURN(shard, Split(index, t, style, 0, tp));
    } else if (style == ShardStyle::kRowwise && rank >= 2) {
      WL_ASSIGN_OR_RETURN(shard, Split(index, t, style, rank - 1, tp));
    } else {
      shard = Replicated(index, t);
    }
    (shard.is_split() ? out.split_bytes : out.replicated_bytes) += shard.bytes;
    out.shards.push_back(std::move(shard));
  }
  for (size_t i = 0; i < tp.plan.size(); ++i) {
    if (used[i]) continue;
    const TpPlanEntry& e = tp.plan[i];
    bool matches_any = false;
    for (const TensorInfo& t : tensors) {
      if (patterns[i].Matches(t.name)) {
        matches_any = true;
        break;
      }
    }
    out.warnings.push_back(
        "tp_plan pattern '" + e.pattern + "' (" +
        std::string(ShardStyleName(e.style)) + ") " +
        (matches_any ? "is never used: an earlier pattern matches first for "
                       "every tensor it matches"
                     : "matches no tensor of the checkpoint"));
  }
  // Sharded, yet nothing split: each rank loads (and holds) every byte,
  // which is what a forgotten plan does, so the report says so.
  const bool splits_any =
      std::any_of(out.shards.begin(), out.shards.end(),
                  [](const TensorShard& s) { return s.is_split(); });
  if (tp.size > 1 && !tensors.empty() && !splits_any) {
    out.warnings.push_back(
        std::string(tp.plan.empty() ? "tp_plan is empty"
                                    : "tp_plan splits no tensor") +
        ": every tensor is replicated, so each of the " +
        std::to_string(tp.size) + " ranks loads the whole checkpoint (" +
        std::to_string(out.replicated_bytes) +
        " bytes); give patterns that split its large weights (colwise, "
        "rowwise; in Python, tp_plan=\"auto\" takes the transformers "
        "model's own plan)");
  }
  return out;
}

std::vector<TensorRequest> ShardRequests(std::span<const TensorInfo> tensors,
                                         const ShardedTensors& shards) {
  std::vector<TensorRequest> out;
  out.reserve(shards.shards.size());
  for (const TensorShard& s : shards.shards) {
    const TensorInfo& t = tensors[s.tensor];
    TensorRequest r;
    r.name = t.name;
    if (s.is_split()) {
      for (size_t d = 0; d < t.shape.size(); ++d) {
        r.slices.push_back(DimSlice{0, t.shape[d], 1});
      }
      r.slices[static_cast<size_t>(s.dim)] = DimSlice{s.start, s.stop, 1};
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace weightlift
