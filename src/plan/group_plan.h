// Group planning: which rank of a process group reads which bytes, and which
// collective delivers them to the others. Pure; the same plan on every rank
// (it depends only on the checkpoint, the group size and the TP plan, never
// on the rank), so ranks agree on the order of collectives without talking.
//
// Two modes:
//  - full: every rank ends with every whole tensor. A large tensor whose
//    dim 0 divides by n is split into n equal dim-0 parts, one read by each
//    rank, and all-gathered in place; any other tensor is read whole by one
//    owner and broadcast. Owners are balanced by bytes within each batch.
//  - sharded (TP): split tensors are read by each rank for itself (no
//    traffic); each replicated tensor is read once by its owner and
//    broadcast (or all-gathered, as in full mode).
// Steps come in batches of about batch_bytes of tensors (file order), so an
// executor can read batch k + 1 while batch k's collectives run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift::internal {

enum class Delivery : uint8_t {
  kLocal,      // each rank reads its own part; nothing crosses the group
  kBroadcast,  // `root` reads the whole tensor, then broadcasts it
  kAllGather,  // rank r reads dim-0 rows [r * part_rows, (r+1) * part_rows)
};
const char* DeliveryName(Delivery d);

struct GroupStep {
  uint32_t tensor = 0;  // index into the tensors planned
  Delivery delivery = Delivery::kLocal;
  int root = -1;            // kBroadcast only
  uint64_t part_rows = 0;   // kAllGather only
  uint64_t part_bytes = 0;  // kAllGather only: bytes each rank reads
  uint32_t batch = 0;
};

struct GroupPlanOptions {
  // Tensors at least this large, with dim 0 a multiple of n, are
  // all-gathered; smaller ones are broadcast whole (one collective instead
  // of a read on every rank for a few bytes each).
  uint64_t allgather_min_bytes = 4u << 20;
  // False when the executor cannot read part of a tensor: then every
  // non-local tensor is broadcast whole.
  bool partial_reads = true;
  // 0: automatic (AutoBatchBytes). Each batch costs a status exchange and
  // a wait for its reads. (Until session 18 it also cost a load's start
  // and drain: on one H200, Llama-2-7B in a group of one took 263 ms plain,
  // 303 / 314 / 362 / 505 ms in 4 / 13 / 45 / 163 batches;
  // bench/results/2026-12-05-h200-session16, call D.) Smaller batches let
  // the collectives start sooner behind the reads.
  uint64_t batch_bytes = 0;
};

// The automatic batch size for tensors of TOTAL bytes: about
// kAutoBatches batches, none under kMinAutoBatchBytes and none over
// kMaxAutoBatchBytes. The cap bounds how long a rank that has read its
// bytes of a batch waits in the batch's status exchange for the slowest
// one, which the group's collective timeout covers: an eighth of a 405B
// checkpoint would be 100 GB, minutes on shared storage; on the H200,
// Llama-2-7B in 4 GiB batches took 303 ms against 308 ms in eighths
// (sessions 16 and 17), so the cap costs large checkpoints nothing
// measurable.
inline constexpr uint64_t kAutoBatches = 8;
inline constexpr uint64_t kMinAutoBatchBytes = 256u << 20;
inline constexpr uint64_t kMaxAutoBatchBytes = 4ull << 30;
uint64_t AutoBatchBytes(uint64_t total);

struct GroupPlan {
  int size = 1;
  std::vector<GroupStep> steps;  // tensor order
  uint32_t batches = 0;
  std::vector<uint64_t> bytes_read_per_rank;  // size entries; local parts
                                              // count only for their rank
                                              // (see LocalBytes)
  uint64_t broadcast_bytes = 0;
  uint64_t allgather_bytes = 0;
};

// Full mode over TENSORS for a group of SIZE ranks. REQUIRES size >= 1.
GroupPlan PlanFullGroup(std::span<const TensorInfo> tensors, int size,
                        const GroupPlanOptions& options);

// Sharded mode: SHARDS from ShardTensors(tensors, tp) of any rank (only
// which tensors are split matters). Split tensors become kLocal steps and
// add nothing to bytes_read_per_rank (each rank adds its own shard bytes).
GroupPlan PlanShardedGroup(std::span<const TensorInfo> tensors,
                           const ShardedTensors& shards, int size,
                           const GroupPlanOptions& options);

// A fingerprint of what the ranks of a group must agree on before any data
// moves: the mode, the group size, the TP plan, and the checkpoint's
// identity (every tensor's name, dtype, shape, file, offset and size, and
// every file's size), the plan's OPTIONS (ranks that batch or split
// differently would issue different collectives) and CONTENT, a sample of the
// tensors' bytes (dist/tensor_sample.h: two checkpoints of one layout differ
// there). 32 lower-case hex digits. Not a security hash: it catches ranks
// started with different arguments or checkpoints.
std::string GroupFingerprint(std::span<const TensorInfo> tensors,
                             std::span<const FileInfo> files, bool sharded,
                             const TensorParallel& tp,
                             const GroupPlanOptions& options,
                             std::string_view content);

}  // namespace weightlift::internal
