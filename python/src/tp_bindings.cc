// weightlift._native's tensor-parallel functions: the C++ shard rule and
// group planner (src/plan), for weightlift/_tp.py and _group.py.
//
// They take the checkpoint as Checkpoint.tensors() returns it, a list of
// (name, dtype, shape, file, offset, size), so this file needs nothing from
// module.cc. A bad argument comes back as {"error": (code, message)} and the
// Python side raises it through weightlift._errors.from_status, the same
// classes every other error has.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "plan/group_plan.h"
#include "weightlift/checkpoint.h"
#include "weightlift/dtype.h"
#include "weightlift/status.h"
#include "weightlift/tensor_parallel.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace weightlift::python {
namespace {

using TensorTuple = std::tuple<std::string, std::string, std::vector<uint64_t>,
                               uint32_t, uint64_t, uint64_t>;
using PlanPairs = std::vector<std::tuple<std::string, std::string>>;

nb::dict ErrorDict(const Status& s) {
  nb::dict d;
  d["error"] =
      nb::make_tuple(std::string(StatusCodeName(s.code())), s.message());
  return d;
}

StatusOr<std::vector<TensorInfo>> ToInfos(
    const std::vector<TensorTuple>& tensors) {
  std::vector<TensorInfo> out;
  out.reserve(tensors.size());
  for (const auto& [name, dtype, shape, file, offset, size] : tensors) {
    std::optional<DType> d = ParseDType(dtype);
    if (!d) return Status::InvalidArgument("unknown dtype '" + dtype + "'");
    TensorInfo t;
    t.name = name;
    t.dtype = *d;
    t.shape = shape;
    t.file = file;
    t.offset = offset;
    t.size = size;
    out.push_back(std::move(t));
  }
  return out;
}

StatusOr<TensorParallel> ToTp(int rank, int size, const PlanPairs& plan) {
  TensorParallel tp;
  tp.rank = rank;
  tp.size = size;
  for (const auto& [pattern, word] : plan) {
    StatusOr<ShardStyle> style = ParseShardStyle(word);
    if (!style.ok()) {
      return Status::InvalidArgument(style.status().message() +
                                     " for pattern '" + pattern + "'");
    }
    tp.plan.push_back({pattern, *style});
  }
  WL_RETURN_IF_ERROR(tp.Validate());
  return tp;
}

// {"shards": [(dim, start, stop, shape, bytes, runs, run_bytes, run_stride,
//   first_byte, style)], "warnings", "split_bytes", "replicated_bytes"}.
nb::dict TpShards(const std::vector<TensorTuple>& tensors, int rank, int size,
                  const PlanPairs& plan) {
  auto infos = ToInfos(tensors);
  if (!infos.ok()) return ErrorDict(infos.status());
  auto tp = ToTp(rank, size, plan);
  if (!tp.ok()) return ErrorDict(tp.status());
  auto sharded = ShardTensors(*infos, *tp);
  if (!sharded.ok()) return ErrorDict(sharded.status());
  nb::list shards;
  for (const TensorShard& s : sharded->shards) {
    shards.append(nb::make_tuple(
        s.dim, s.start, s.stop, s.shape, s.bytes, s.runs, s.run_bytes,
        s.run_stride, s.first_byte, std::string(ShardStyleName(s.style))));
  }
  nb::dict d;
  d["shards"] = shards;
  d["warnings"] = sharded->warnings;
  d["split_bytes"] = sharded->split_bytes;
  d["replicated_bytes"] = sharded->replicated_bytes;
  return d;
}

// {"steps": [(delivery, root, part_rows, part_bytes, batch)],
//  "bytes_read_per_rank", "batches", "broadcast_bytes", "allgather_bytes"}.
// SHARDED: plan the replicated tensors of TP (rank, size, plan) only.
nb::dict GroupPlanDict(const std::vector<TensorTuple>& tensors, int size,
                       bool sharded, const PlanPairs& plan,
                       uint64_t allgather_min_bytes, bool partial_reads,
                       uint64_t batch_bytes) {
  auto infos = ToInfos(tensors);
  if (!infos.ok()) return ErrorDict(infos.status());
  auto tp = ToTp(0, size, plan);
  if (!tp.ok()) return ErrorDict(tp.status());
  internal::GroupPlanOptions o;
  o.allgather_min_bytes = allgather_min_bytes;
  o.partial_reads = partial_reads;
  o.batch_bytes = batch_bytes;
  internal::GroupPlan p;
  if (sharded) {
    auto shards = ShardTensors(*infos, *tp);
    if (!shards.ok()) return ErrorDict(shards.status());
    p = internal::PlanShardedGroup(*infos, *shards, size, o);
  } else {
    p = internal::PlanFullGroup(*infos, size, o);
  }
  nb::list steps;
  for (const internal::GroupStep& s : p.steps) {
    steps.append(nb::make_tuple(std::string(internal::DeliveryName(s.delivery)),
                                s.root, s.part_rows, s.part_bytes, s.batch));
  }
  nb::dict d;
  d["steps"] = steps;
  d["bytes_read_per_rank"] = p.bytes_read_per_rank;
  d["batches"] = p.batches;
  d["broadcast_bytes"] = p.broadcast_bytes;
  d["allgather_bytes"] = p.allgather_bytes;
  return d;
}

nb::object Fingerprint(const std::vector<TensorTuple>& tensors,
                       const std::vector<uint64_t>& file_sizes, bool sharded,
                       int size, const PlanPairs& plan) {
  auto infos = ToInfos(tensors);
  if (!infos.ok()) return ErrorDict(infos.status());
  auto tp = ToTp(0, size < 1 ? 1 : size, plan);
  if (!tp.ok()) return ErrorDict(tp.status());
  std::vector<FileInfo> files(file_sizes.size());
  for (size_t i = 0; i < files.size(); ++i) files[i].size = file_sizes[i];
  return nb::str(
      internal::GroupFingerprint(*infos, files, sharded, *tp).c_str());
}

}  // namespace

void BindTensorParallel(nb::module_& m) {
  m.def("tp_shards", &TpShards, "tensors"_a, "rank"_a, "size"_a, "plan"_a);
  m.def("group_plan", &GroupPlanDict, "tensors"_a, "size"_a, "sharded"_a,
        "plan"_a, "allgather_min_bytes"_a, "partial_reads"_a, "batch_bytes"_a);
  m.def("group_fingerprint", &Fingerprint, "tensors"_a, "file_sizes"_a,
        "sharded"_a, "size"_a, "plan"_a);
}

}  // namespace weightlift::python
