// weightlift._native's tensor-parallel functions: the C++ shard rule and
// group planner (src/plan), for weightlift/_tp.py and _group.py, and the
// GroupTransport interface (include/weightlift/group.h) as a class Python
// subclasses (weightlift._group.TorchGroupTransport fills it with a
// torch.distributed group; module.cc's start_load_group runs
// LoadWithGroup over it).
//
// They take the checkpoint as Checkpoint.tensors() returns it, a list of
// (name, dtype, shape, file, offset, size), so this file needs nothing from
// module.cc. A bad argument comes back as {"error": (code, message)} and the
// Python side raises it through weightlift._errors.from_status, the same
// classes every other error has.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nanobind/trampoline.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "module_common.h"
#include "plan/group_plan.h"
#include "weightlift/checkpoint.h"
#include "weightlift/dtype.h"
#include "weightlift/group.h"
#include "weightlift/status.h"
#include "weightlift/tensor_parallel.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace weightlift::python {

StatusOr<TensorParallel> ParseTensorParallel(
    int rank, int size,
    const std::vector<std::tuple<std::string, std::string>>& plan);

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
  return ParseTensorParallel(rank, size, plan);
}

// The trampoline of GroupTransport: its collectives call the Python
// subclass's broadcast(buf, root) / all_gather(buf, part_bytes), BUF a 1-D
// uint8 array (DLPack, host or the CUDA device of the memory) over the C++
// memory, valid only during the call. They run on the group load's thread:
// the GIL is taken for each call. A Python exception becomes IoError with
// its text (the subclass keeps the exception itself for its caller).
class PyGroupTransport : public GroupTransport {
 public:
  NB_TRAMPOLINE(GroupTransport);

  int rank() const override {
    nb::gil_scoped_acquire gil;
    NB_OVERRIDE_PURE(rank);
  }
  int size() const override {
    nb::gil_scoped_acquire gil;
    NB_OVERRIDE_PURE(size);
  }
  Status Broadcast(void* data, uint64_t bytes, int root) override {
    return Call("broadcast", data, bytes, root);
  }
  Status AllGather(void* data, uint64_t part_bytes) override {
    const uint64_t n = static_cast<uint64_t>(size());
    return Call("all_gather", data, part_bytes * n, part_bytes);
  }
  // The subclass's run_all([(kind, buf, arg)]) (kind "broadcast", arg the
  // root, or "all_gather", arg the part's bytes) issues a batch's
  // collectives before it waits for them; *FAILED is its failed_at, the
  // index it sets before it raises. A subclass without run_all gets the
  // default, one collective at a time.
  Status RunAll(std::span<const GroupCollective> collectives,
                size_t* failed) override {
    const uint64_t n = static_cast<uint64_t>(size());
    bool has_run_all = false;
    {
      nb::gil_scoped_acquire gil;
      has_run_all = nb::hasattr(nb_trampoline.base(), "run_all");
    }
    if (!has_run_all) return GroupTransport::RunAll(collectives, failed);
    nb::gil_scoped_acquire gil;
    try {
      nb::list items;
      for (const GroupCollective& c : collectives) {
        const bool bcast = c.kind == GroupCollective::Kind::kBroadcast;
        items.append(
            nb::make_tuple(bcast ? "broadcast" : "all_gather",
                           Buffer(c.data, bcast ? c.bytes : c.bytes * n),
                           bcast ? static_cast<int64_t>(c.root)
                                 : static_cast<int64_t>(c.bytes)));
      }
      nb_trampoline.base().attr("run_all")(items);
      return Status::OK();
    } catch (nb::python_error& e) {
      if (failed) {
        *failed = collectives.size();
        nb::object at =
            nb::getattr(nb_trampoline.base(), "failed_at", nb::none());
        if (nb::isinstance<nb::int_>(at)) {
          const int64_t k = nb::cast<int64_t>(at);
          if (k >= 0 && static_cast<size_t>(k) < collectives.size()) {
            *failed = static_cast<size_t>(k);
          }
        }
      }
      return Status::IoError(ErrorText(e));
    } catch (const std::exception& e) {
      if (failed) *failed = collectives.size();
      return Status::IoError(std::string("run_all: ") + e.what());
    }
  }
  // Kept until the Python object goes: torch cannot cancel a gloo
  // collective whose wait timed out, and it may still write here.
  void Retain(std::shared_ptr<void> memory) override {
    std::lock_guard<std::mutex> lock(mu_);
    retained_.push_back(std::move(memory));
  }

  // Where the buffers live (set by start_load_group before the load).
  void set_device(const Device& d) { device_ = d; }

 private:
  // BYTES at DATA as a 1-D uint8 array on the memory's device. The owner
  // owns nothing: the memory is the group load's, alive for the call (and
  // after a failure, through Retain). GIL held.
  nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig> Buffer(void* data,
                                                         uint64_t bytes) {
    size_t shape[1] = {static_cast<size_t>(bytes)};
    const int type =
        device_.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
    nb::capsule borrowed(data, [](void*) noexcept {});
    return nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig>(
        data, 1, shape, borrowed, nullptr, nb::dtype<uint8_t>(), type,
        device_.is_cuda() ? device_.index : 0);
  }

  static std::string ErrorText(nb::python_error& e) {
    try {
      return nb::cast<std::string>(nb::str(e.value()));
    } catch (...) {
      return e.what();
    }
  }

  Status Call(const char* method, void* data, uint64_t bytes, int64_t arg) {
    nb::gil_scoped_acquire gil;
    try {
      nb_trampoline.base().attr(method)(Buffer(data, bytes), arg);
      return Status::OK();
    } catch (nb::python_error& e) {
      return Status::IoError(ErrorText(e));
    } catch (const std::exception& e) {
      return Status::IoError(std::string(method) + ": " + e.what());
    }
  }

  Device device_;
  std::mutex mu_;
  std::vector<std::shared_ptr<void>> retained_;
};

}  // namespace

void SetTransportDevice(GroupTransport& t, const Device& d) {
  if (auto* p = dynamic_cast<PyGroupTransport*>(&t)) p->set_device(d);
}

StatusOr<TensorParallel> ParseTensorParallel(
    int rank, int size,
    const std::vector<std::tuple<std::string, std::string>>& plan) {
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

namespace {

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
  // No content sample and the plan's default options: each of the
  // stream's windows is a LoadWithGroup, which compares its own.
  return nb::str(internal::GroupFingerprint(*infos, files, sharded, *tp,
                                            internal::GroupPlanOptions{}, {})
                     .c_str());
}

// AgreeOnGroupLoad over TRANSPORT (a Python GroupTransport) on DEVICE:
// None, or {"error": (code, message)}. ERROR: this rank's (code, message)
// when it cannot start. The GIL is released; the collectives take it.
nb::object GroupAgree(
    GroupTransport& transport, const std::string& device,
    const std::string& fingerprint,
    const std::optional<std::tuple<std::string, std::string>>& error) {
  StatusOr<Device> d = Device::Parse(device);
  if (!d.ok()) return ErrorDict(d.status());
  SetTransportDevice(transport, *d);
  Status mine = Status::OK();
  if (error) mine = StatusFromPair(*error);
  Status s = Status::OK();
  {
    nb::gil_scoped_release nogil;
    s = AgreeOnGroupLoad(transport, *d, mine, fingerprint);
  }
  if (!s.ok()) return ErrorDict(s);
  return nb::none();
}

}  // namespace

void BindTensorParallel(nb::module_& m) {
  nb::class_<GroupTransport, PyGroupTransport>(m, "GroupTransport")
      .def(nb::init<>())
      .def("rank", &GroupTransport::rank)
      .def("size", &GroupTransport::size);
  m.def("tp_shards", &TpShards, "tensors"_a, "rank"_a, "size"_a, "plan"_a);
  m.def("group_plan", &GroupPlanDict, "tensors"_a, "size"_a, "sharded"_a,
        "plan"_a, "allgather_min_bytes"_a, "partial_reads"_a, "batch_bytes"_a);
  m.def("group_agree", &GroupAgree, "transport"_a, "device"_a, "fingerprint"_a,
        "error"_a.none());
  m.def("group_fingerprint", &Fingerprint, "tensors"_a, "file_sizes"_a,
        "sharded"_a, "size"_a, "plan"_a);
}

}  // namespace weightlift::python
