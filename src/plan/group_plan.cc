#include "plan/group_plan.h"

#include <algorithm>

#include "util/fnv.h"

namespace weightlift::internal {

const char* DeliveryName(Delivery d) {
  switch (d) {
    case Delivery::kLocal:
      return "local";
    case Delivery::kBroadcast:
      return "broadcast";
    case Delivery::kAllGather:
      return "all_gather";
  }
  return "?";
}

namespace {

// Rows of dim 0 each rank reads when T is all-gathered, or 0 when T should
// be broadcast instead (too small, no dim 0, or dim 0 not a multiple of n:
// an all-gather needs equal parts, and padding would cost a copy).
uint64_t AllGatherRows(const TensorInfo& t, int size,
                       const GroupPlanOptions& options) {
  if (!options.partial_reads || size < 2 || t.shape.empty()) return 0;
  if (t.size < options.allgather_min_bytes) return 0;
  const uint64_t rows = t.shape[0];
  const uint64_t n = static_cast<uint64_t>(size);
  if (rows < n || rows % n != 0) return 0;
  // size / rows is a whole number of bytes per row unless the dtype is
  // sub-byte and a row ends mid-byte; then a part would too.
  if (t.size % rows != 0) return 0;
  return rows / n;
}

// OPTIONS' batch size, or the automatic one for TENSORS (0).
uint64_t BatchBytesInEffect(std::span<const TensorInfo> tensors,
                            const GroupPlanOptions& options) {
  if (options.batch_bytes > 0) return options.batch_bytes;
  uint64_t total = 0;
  for (const TensorInfo& t : tensors) total += t.size;
  return AutoBatchBytes(total);
}

// Plans every tensor of TENSORS for a group of SIZE, in batches: LOCAL
// marks tensors each rank reads for itself; every other one is needed whole
// by every rank.
GroupPlan PlanSteps(std::span<const TensorInfo> tensors,
                    const std::vector<bool>& local, int size,
                    const GroupPlanOptions& options) {
  GroupPlan plan;
  plan.size = size;
  plan.bytes_read_per_rank.assign(static_cast<size_t>(size), 0);
  plan.steps.resize(tensors.size());
  const uint64_t batch_bytes = BatchBytesInEffect(tensors, options);

  // Cut batches in tensor order by bytes; then balance each batch's
  // broadcast owners (largest first, onto the rank with the fewest bytes in
  // this batch, then in all, then the lowest rank).
  size_t begin = 0;
  uint32_t batch = 0;
  while (begin < tensors.size()) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < tensors.size() && (end == begin || bytes < batch_bytes)) {
      bytes += tensors[end].size;
      ++end;
    }
    std::vector<uint64_t> in_batch(static_cast<size_t>(size), 0);
    std::vector<size_t> broadcast;
    for (size_t i = begin; i < end; ++i) {
      GroupStep& s = plan.steps[i];
      s.tensor = static_cast<uint32_t>(i);
      s.batch = batch;
      if (local[i]) {
        s.delivery = Delivery::kLocal;
        continue;
      }
      const uint64_t rows = AllGatherRows(tensors[i], size, options);
      if (rows) {
        s.delivery = Delivery::kAllGather;
        s.part_rows = rows;
        s.part_bytes = tensors[i].size / static_cast<uint64_t>(size);
        for (int r = 0; r < size; ++r) {
          in_batch[static_cast<size_t>(r)] += s.part_bytes;
          plan.bytes_read_per_rank[static_cast<size_t>(r)] += s.part_bytes;
        }
        plan.allgather_bytes += tensors[i].size;
        continue;
      }
      s.delivery = Delivery::kBroadcast;
      broadcast.push_back(i);
    }
    std::stable_sort(
        broadcast.begin(), broadcast.end(),
        [&](size_t a, size_t b) { return tensors[a].size > tensors[b].size; });
    for (size_t i : broadcast) {
      int best = 0;
      for (int r = 1; r < size; ++r) {
        const auto ur = static_cast<size_t>(r);
        const auto ub = static_cast<size_t>(best);
        if (in_batch[ur] < in_batch[ub] ||
            (in_batch[ur] == in_batch[ub] &&
             plan.bytes_read_per_rank[ur] < plan.bytes_read_per_rank[ub])) {
          best = r;
        }
      }
      plan.steps[i].root = best;
      in_batch[static_cast<size_t>(best)] += tensors[i].size;
      plan.bytes_read_per_rank[static_cast<size_t>(best)] += tensors[i].size;
      plan.broadcast_bytes += tensors[i].size;
    }
    begin = end;
    ++batch;
  }
  plan.batches = batch;
  return plan;
}

}  // namespace

uint64_t AutoBatchBytes(uint64_t total) {
  return std::clamp(total / kAutoBatches + (total % kAutoBatches != 0),
                    kMinAutoBatchBytes, kMaxAutoBatchBytes);
}

GroupPlan PlanFullGroup(std::span<const TensorInfo> tensors, int size,
                        const GroupPlanOptions& options) {
  return PlanSteps(tensors, std::vector<bool>(tensors.size(), false), size,
                   options);
}

GroupPlan PlanShardedGroup(std::span<const TensorInfo> tensors,
                           const ShardedTensors& shards, int size,
                           const GroupPlanOptions& options) {
  std::vector<bool> local(tensors.size(), false);
  for (const TensorShard& s : shards.shards) {
    if (s.tensor < local.size()) local[s.tensor] = s.is_split();
  }
  return PlanSteps(tensors, local, size, options);
}

std::string GroupFingerprint(std::span<const TensorInfo> tensors,
                             std::span<const FileInfo> files, bool sharded,
                             const TensorParallel& tp,
                             const GroupPlanOptions& options,
                             std::string_view content) {
  const uint64_t batch_bytes = BatchBytesInEffect(tensors, options);
  // Two bases make the 128-bit print.
  Fnv a{kFnvOffsetBasis};
  Fnv b{0x84222325cbf29ce4ull};
  auto both = [&](auto&& fn) {
    fn(a);
    fn(b);
  };
  both([&](Fnv& f) {
    // v2: the content sample; v3: the plan's options; v4: the batch size
    // in effect (0 meant one tensor a batch before it meant automatic).
    f.Str("weightlift-group-v4");
    f.U64(sharded ? 1 : 0);
    f.U64(options.allgather_min_bytes);
    f.U64(batch_bytes);
    f.U64(options.partial_reads ? 1 : 0);
    f.U64(static_cast<uint64_t>(tp.size));
    f.U64(tp.plan.size());
    for (const TpPlanEntry& e : tp.plan) {
      f.Str(e.pattern);
      f.U64(static_cast<uint64_t>(e.style));
    }
    f.U64(files.size());
    for (const FileInfo& file : files) f.U64(file.size);
    f.U64(tensors.size());
    for (const TensorInfo& t : tensors) {
      f.Str(t.name);
      f.U64(static_cast<uint64_t>(t.dtype));
      f.U64(t.shape.size());
      for (uint64_t d : t.shape) f.U64(d);
      f.U64(t.file);
      f.U64(t.offset);
      f.U64(t.size);
    }
    f.Str(content);
  });
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint64_t h : {a.h, b.h}) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      out.push_back(kHex[(h >> shift) & 0xf]);
    }
  }
  return out;
}

}  // namespace weightlift::internal
