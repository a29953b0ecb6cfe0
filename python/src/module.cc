// weightlift._native: the thin nanobind layer under the Python package.
//
// Everything user-facing (safetensors-compatible names, dtype mapping,
// torch/numpy conversion, options, progress bars) lives in the pure-Python
// package; this module only exposes the C++ API:
//   - Checkpoint: Checkpoint::Open and what it describes.
//   - Loader: Loader::Create from an options dict.
//   - Job: one load (Load or LoadInto) running on its own thread with no GIL.
//     Python waits on it with timeouts (so Ctrl-C and progress bars work),
//     and on_ready indices arrive through a mutex/condvar queue.
// Loaded buffers leave as 1-D uint8 DLPack-capable arrays whose owner capsule
// holds the C++ shared_ptr; the last view to die frees the memory.
// Errors become Python exceptions built by a factory the package installs
// (see weightlift/_errors.py), so the class hierarchy lives in Python.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/register_ahead.h"
#include "exec/read_counts.h"
#include "exec/warm_row_pages.h"
#include "module_common.h"
#include "util/fork_epoch.h"
#include "weightlift/checkpoint.h"
#include "weightlift/dtype.h"
#include "weightlift/format_error.h"
#include "weightlift/group.h"
#include "weightlift/loader.h"
#include "weightlift/object_storage.h"
#include "weightlift/options.h"
#include "weightlift/report.h"
#include "weightlift/request.h"
#include "weightlift/status.h"
#include "weightlift/tensor_parallel.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace weightlift::python {

// ---- Checkpoint -----------------------------------------------------------

namespace {

PyCheckpoint OpenCheckpoint(const std::string& path) {
  StatusOr<Checkpoint> c = Status::Internal("unset");
  {
    nb::gil_scoped_release nogil;
    // s3:// and http(s)://: the environment is read here, on every open, so
    // changes to os.environ between calls take effect.
    Status configured = IsObjectStorageLocation(path)
                            ? ConfigureObjectStorageFromEnvironment()
                            : Status::OK();
    c = configured.ok() ? Checkpoint::Open(path)
                        : StatusOr<Checkpoint>(configured);
  }
  return PyCheckpoint{
      std::make_shared<const Checkpoint>(ValueOrRaise(std::move(c)))};
}

// ---- Job ------------------------------------------------------------------

// Shared between the loading thread (and its callbacks) and Python.
struct JobState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> ready;  // request indices, in completion order
  bool done = false;
  Status status;
  std::optional<LoadResult> result;  // Load only
  // Tensors a group load made final before the end (take_ready).
  std::map<size_t, LoadedTensor> early;
  LoadReport report;  // LoadInto (Load: result->report)
  std::atomic<uint64_t> progress_done{0};
  std::atomic<uint64_t> progress_total{0};
  // Job.cancel(): the load takes no more reads (LoadCallbacks::cancel).
  std::atomic<bool> cancel{false};
  // When the thread began and when its load returned (steady_clock, ns:
  // CLOCK_MONOTONIC, as Python's time.monotonic_ns), so a caller can tell
  // the thread's start and end from the load's own seconds (Job.times).
  std::atomic<int64_t> began_ns{0};
  std::atomic<int64_t> returned_ns{0};
};

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// What a Job runs: Load(names), LoadInto(dests), LoadSlices(requests) or
// LoadSlicesInto(requests, dests);
// a group load (LoadWithGroup) is a kCustom job's function.
enum class JobKind { kLoad, kLoadInto, kLoadSlices, kLoadSlicesInto, kCustom };

// A load as a function of its callbacks and state (kCustom).
using LoadFunction =
    std::function<StatusOr<LoadResult>(const LoadCallbacks&, JobState&)>;

class Job {
 public:
  // Starts Load (names), LoadInto (dests), LoadSlices (requests) or RUN
  // (kCustom) on a new thread. KEEPALIVE is held until the thread has
  // ended: for LoadInto it owns the destination memory, which must outlive
  // every write; for a group load, the transport the thread calls.
  Job(std::shared_ptr<Loader> loader, std::shared_ptr<const Checkpoint> ckpt,
      JobKind kind, std::vector<std::string> names,
      std::vector<Destination> dests, std::vector<TensorRequest> requests,
      nb::object keepalive, LoadFunction run = nullptr)
      : loader_(std::move(loader)),
        ckpt_(std::move(ckpt)),
        state_(std::make_shared<JobState>()),
        keepalive_(std::move(keepalive)) {
    LoadCallbacks cb;
    cb.on_ready = [st = state_](size_t index, const TensorInfo&) {
      {
        std::lock_guard<std::mutex> lock(st->mu);
        st->ready.push_back(index);
      }
      st->cv.notify_all();
    };
    cb.on_progress = [st = state_](uint64_t done, uint64_t total) {
      st->progress_done.store(done, std::memory_order_relaxed);
      st->progress_total.store(total, std::memory_order_relaxed);
    };
    cb.cancel = &state_->cancel;  // the thread holds state_ to its end
    thread_ = std::thread([loader = loader_, ckpt = ckpt_, st = state_,
                           names = std::move(names), dests = std::move(dests),
                           requests = std::move(requests), kind,
                           run = std::move(run), cb = std::move(cb)]() mutable {
      st->began_ns.store(SteadyNowNs(), std::memory_order_relaxed);
      Status status;
      std::optional<LoadResult> result;
      LoadReport report;
      if (kind == JobKind::kLoadInto) {
        status = loader->LoadInto(*ckpt, dests, &report, cb);
      } else if (kind == JobKind::kLoadSlicesInto) {
        status = loader->LoadSlicesInto(*ckpt, requests, dests, &report, cb);
      } else {
        StatusOr<LoadResult> r = kind == JobKind::kCustom ? run(cb, *st)
                                 : kind == JobKind::kLoadSlices
                                     ? loader->LoadSlices(*ckpt, requests, cb)
                                     : loader->Load(*ckpt, names, cb);
        if (r.ok()) {
          result.emplace(std::move(r).value());
          report = result->report;
        } else {
          status = r.status();
        }
      }
      st->returned_ns.store(SteadyNowNs(), std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(st->mu);
        st->status = std::move(status);
        st->result = std::move(result);
        st->report = std::move(report);
        st->done = true;
      }
      st->cv.notify_all();
    });
  }

  ~Job() {
    if (made_.forked()) {
      // The load ran on a thread of the parent (util/fork_epoch.h): neither
      // it nor its state's mutex and condition variable are ours to wait
      // on or destroy.
      internal::AbandonThread(std::move(thread_));
      internal::Abandon(std::move(state_));
      return;
    }
    if (thread_.joinable()) {
      nb::gil_scoped_release nogil;
      thread_.join();
    }
    // keepalive_ is released after the join, with the GIL held.
  }

  // (began, returned): when the thread began and when its load returned,
  // in time.monotonic_ns()'s clock; 0 for what has not happened yet.
  nb::tuple Times() const {
    return nb::make_tuple(state_->began_ns.load(std::memory_order_relaxed),
                          state_->returned_ns.load(std::memory_order_relaxed));
  }

  // True when the load has ended (successfully or not).
  bool Wait(double timeout_s) {
    ThrowIfForked();
    nb::gil_scoped_release nogil;
    std::unique_lock<std::mutex> lock(state_->mu);
    return state_->cv.wait_for(lock, ToDuration(timeout_s),
                               [&] { return state_->done; });
  }

  // Next ready index; -1 on timeout; -2 when the load has ended and every
  // ready index was handed out (check status with Finish()).
  int64_t NextReady(double timeout_s) {
    ThrowIfForked();
    nb::gil_scoped_release nogil;
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait_for(lock, ToDuration(timeout_s),
                        [&] { return !state_->ready.empty() || state_->done; });
    if (!state_->ready.empty()) {
      size_t i = state_->ready.front();
      state_->ready.pop_front();
      return static_cast<int64_t>(i);
    }
    return state_->done ? -2 : -1;
  }

  // Stops the load: no more reads are taken, those in flight drain, and
  // the load ends with CancelledError (unless it had ended already). Wait
  // for the end before its memory is let go, as always.
  void Cancel() { state_->cancel.store(true); }

  nb::tuple Progress() const {
    return nb::make_tuple(state_->progress_done.load(),
                          state_->progress_total.load());
  }

  // Waits for the end; raises the load's error; returns the report dict.
  nb::dict Finish() {
    while (!Wait(3600)) {
    }
    Join();
    ThrowIfError(state_->status);
    return ReportDict(state_->report);
  }

  // A tensor next_ready handed out whose bytes came before the end (a
  // group load's): (name, dtype, shape, bytes_or_None) as take_tensors
  // gives it; once per index.
  nb::tuple TakeReady(size_t index) {
    LoadedTensor t;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = state_->early.find(index);
      if (it == state_->early.end()) {
        throw nb::index_error(
            "take_ready: that tensor is not ready, or "
            "was taken already");
      }
      t = std::move(it->second);
      state_->early.erase(it);
    }
    nb::object arr = ExportBytes(t.data, t.size, t.device, t.owner, false);
    return nb::make_tuple(t.name, std::string(DTypeName(t.dtype)),
                          ShapeTuple(t.shape), arr);
  }

  // After a successful Load: [(name, dtype, shape, bytes_or_None)], the
  // bytes as ExportBytes makes them.
  // Hands the buffers over to Python; a second call returns an empty list.
  nb::list TakeTensors(bool as_memoryview) {
    Finish();
    nb::list out;
    if (!state_->result) return out;
    for (LoadedTensor& t : state_->result->tensors) {
      nb::object arr =
          ExportBytes(t.data, t.size, t.device, t.owner, as_memoryview);
      out.append(nb::make_tuple(t.name, std::string(DTypeName(t.dtype)),
                                ShapeTuple(t.shape), arr));
      t.owner.reset();
    }
    state_->result.reset();
    return out;
  }

 private:
  static std::chrono::duration<double> ToDuration(double s) {
    return std::chrono::duration<double>(s < 0 ? 0 : s);
  }
  // A load that was running when this process forked from its parent runs
  // on in the parent only; waiting for it here would never end.
  void ThrowIfForked() const {
    ThrowIfError(made_.CheckNotForked(
        "this load",
        "start it again in this process (weightlift's loading "
        "functions make their own loaders there)"));
  }
  void Join() {
    ThrowIfForked();
    if (thread_.joinable()) {
      nb::gil_scoped_release nogil;
      thread_.join();
    }
    keepalive_ = nb::none();
  }

  std::shared_ptr<Loader> loader_;
  std::shared_ptr<const Checkpoint> ckpt_;
  std::shared_ptr<JobState> state_;
  nb::object keepalive_;
  std::thread thread_;
  internal::MadeInProcess made_;
};

// ---- Loader ---------------------------------------------------------------

}  // namespace

// tp_bindings.cc: the shard rule from Python's words, and the device the
// Python transport's buffers are on.
StatusOr<TensorParallel> ParseTensorParallel(
    int rank, int size,
    const std::vector<std::tuple<std::string, std::string>>& plan);
void SetTransportDevice(GroupTransport& t, const Device& d);

namespace {

PyLoader CreateLoader(const nb::dict& opts) {
  LoadOptions o = OptionsFromDict(opts);
  StatusOr<std::unique_ptr<Loader>> l = Status::Internal("unset");
  {
    nb::gil_scoped_release nogil;
    l = Loader::Create(o);
  }
  return PyLoader{std::shared_ptr<Loader>(ValueOrRaise(std::move(l)))};
}

Job* StartLoad(PyLoader& self, const PyCheckpoint& ckpt,
               std::vector<std::string> names) {
  return new Job(self.loader, ckpt.ckpt, JobKind::kLoad, std::move(names), {},
                 {}, nb::none());
}

// REQUESTS: [(name, [(start, stop, step), ...])], every index already
// normalized (non-negative, start <= stop <= dim, step >= 1; an integer
// index is (i, i + 1, 1)); an empty list is the whole tensor. The result
// tensors keep one dimension per tensor dimension (take_tensors gives each
// slice's shape); dropping an integer index's axis is the caller's reshape.
Job* StartLoadSlices(
    PyLoader& self, const PyCheckpoint& ckpt,
    const std::vector<std::tuple<
        std::string, std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>>>&
        requests) {
  std::vector<TensorRequest> r;
  r.reserve(requests.size());
  for (const auto& [name, dims] : requests) {
    TensorRequest tr;
    tr.name = name;
    for (const auto& [start, stop, step] : dims) {
      tr.slices.push_back(DimSlice{start, stop, step});
    }
    r.push_back(std::move(tr));
  }
  return new Job(self.loader, ckpt.ckpt, JobKind::kLoadSlices, {}, {},
                 std::move(r), nb::none());
}

// weightlift._native.TpRequests: a tensor-parallel rank's slice-mode
// request (its parts of the split tensors, the replicated tensors whole, in
// checkpoint order), made by tp_requests from the C++ shard rule over the
// checkpoint's own tensors and started by Loader.start_load_tp: no Python
// object per tensor on the way (a Llama-2-7B rank's ~2 ms in Python).
struct PyTpRequests {
  std::vector<TensorRequest> requests;
  // Where each request's part lands in one block of device_bytes (the
  // loader's own device layout: request order, 256-byte aligned), for
  // start_load_tp_into.
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  uint64_t device_bytes = 0;
};

constexpr uint64_t kBlockAlign = 256;

// (TpRequests, {"split_bytes", "replicated_bytes", "warnings", "bytes",
// "tensors", "layout", "device_bytes"}) for RANK of SIZE under PLAN
// [(pattern, word)]; raises the shard rule's InvalidArgument (bad rank,
// size or word). "layout": [(name, dtype, shape, offset, size)] per request,
// the part's shape at OFFSET in a block of "device_bytes", as
// weightlift._load_torch lays out whole tensors.
nb::tuple TpRequests(
    const PyCheckpoint& ckpt, int rank, int size,
    const std::vector<std::tuple<std::string, std::string>>& plan) {
  TensorParallel tp = ValueOrRaise(ParseTensorParallel(rank, size, plan));
  const std::span<const TensorInfo> tensors = ckpt.ckpt->tensors();
  ShardedTensors sharded = ValueOrRaise(ShardTensors(tensors, tp));
  PyTpRequests r;
  r.requests = ShardRequests(tensors, sharded);
  r.offsets.reserve(sharded.shards.size());
  r.sizes.reserve(sharded.shards.size());
  uint64_t bytes = 0;
  nb::list layout;
  for (const TensorShard& s : sharded.shards) {
    const TensorInfo& t = tensors[s.tensor];
    // Parts are at most their tensor's bytes, so no sum can wrap.
    const uint64_t off =
        (r.device_bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign;
    r.offsets.push_back(off);
    r.sizes.push_back(s.bytes);
    r.device_bytes = off + s.bytes;
    bytes += s.bytes;
    layout.append(nb::make_tuple(t.name, std::string(DTypeName(t.dtype)),
                                 ShapeTuple(s.shape), off, s.bytes));
  }
  r.device_bytes = std::max<uint64_t>(
      (r.device_bytes + kBlockAlign - 1) / kBlockAlign * kBlockAlign,
      kBlockAlign);
  nb::dict info;
  info["split_bytes"] = sharded.split_bytes;
  info["replicated_bytes"] = sharded.replicated_bytes;
  info["warnings"] = sharded.warnings;
  info["bytes"] = bytes;
  info["tensors"] = sharded.shards.size();
  info["layout"] = layout;
  info["device_bytes"] = r.device_bytes;
  return nb::make_tuple(std::move(r), info);
}

// weightlift._native.warm_row_pages: starts filling, on a thread of CKPT's,
// the page tables of the row runs REQUESTS' load will copy out of a mapping
// (src/env/warm_mappings.h), for files at least RESIDENT_THRESHOLD
// resident (negative: LoadOptions' default); returns at once with
// {"files", "runs", "bytes", "skipped"}.
nb::dict WarmRowPages(const PyCheckpoint& ckpt, const PyTpRequests& requests,
                      double resident_threshold) {
  if (resident_threshold < 0) {
    resident_threshold = LoadOptions{}.resident_threshold;
  }
  internal::WarmedRows w = ValueOrRaise(internal::WarmRowPages(
      *ckpt.ckpt, requests.requests, resident_threshold));
  nb::dict out;
  out["files"] = w.files;
  out["runs"] = w.runs;
  out["bytes"] = w.bytes;
  out["skipped"] = w.skipped;
  return out;
}

// weightlift._native.register_pages: starts registering with cuda:DEVICE,
// on a thread of its own, the pages of CKPT's files that REQUESTS' load
// copies from, for files at least RESIDENT_THRESHOLD resident (negative:
// LoadOptions' default); that load then copies them straight from the page
// cache (src/cuda/registered_pages.h), staging the rest beside them.
// FORCED (host_register=on) also registers the parts whose pages are far
// more than their bytes (src/cuda/register_ahead.h). Returns once an
// earlier prepare's pages are let go (the registering is on a thread) with
// {"files", "bytes", "left_bytes", "skipped"}.
nb::dict RegisterPages(const PyCheckpoint& ckpt, const PyTpRequests& requests,
                       int device, double resident_threshold, bool forced) {
  if (resident_threshold < 0) {
    resident_threshold = LoadOptions{}.resident_threshold;
  }
  // Without the GIL: dropping an earlier prepare's pages joins its thread
  // and unregisters them (milliseconds per GB).
  StatusOr<internal::RegisteringAhead> made = [&] {
    nb::gil_scoped_release nogil;
    return internal::RegisterPagesAhead(*ckpt.ckpt, requests.requests, device,
                                        resident_threshold, forced);
  }();
  internal::RegisteringAhead r = ValueOrRaise(std::move(made));
  nb::dict out;
  out["files"] = r.files;
  out["bytes"] = r.bytes;
  out["left_bytes"] = r.left_bytes;
  out["skipped"] = r.skipped;
  return out;
}

Job* StartLoadTp(PyLoader& self, const PyCheckpoint& ckpt,
                 const PyTpRequests& requests) {
  return new Job(self.loader, ckpt.ckpt, JobKind::kLoadSlices, {}, {},
                 requests.requests, nb::none());
}

// REQUESTS' parts into the caller's block at BASE (at least
// requests.device_bytes, laid out as tp_requests' "layout" says); KEEPALIVE
// owns that memory. Empty parts get no destination write.
Job* StartLoadTpInto(PyLoader& self, const PyCheckpoint& ckpt,
                     const PyTpRequests& requests, uintptr_t base,
                     nb::object keepalive) {
  std::vector<Destination> d;
  d.reserve(requests.requests.size());
  for (size_t k = 0; k < requests.requests.size(); ++k) {
    d.push_back(Destination{{},
                            reinterpret_cast<void*>(base + requests.offsets[k]),
                            requests.sizes[k]});
  }
  return new Job(self.loader, ckpt.ckpt, JobKind::kLoadSlicesInto, {},
                 std::move(d), requests.requests, std::move(keepalive));
}

// DESTS: [(name, address, size)]; KEEPALIVE owns that memory.
Job* StartLoadInto(
    PyLoader& self, const PyCheckpoint& ckpt,
    const std::vector<std::tuple<std::string, uintptr_t, uint64_t>>& dests,
    nb::object keepalive) {
  std::vector<Destination> d;
  d.reserve(dests.size());
  for (const auto& [name, addr, size] : dests) {
    d.push_back(Destination{name, reinterpret_cast<void*>(addr), size});
  }
  return new Job(self.loader, ckpt.ckpt, JobKind::kLoadInto, {}, std::move(d),
                 {}, std::move(keepalive));
}

// GROUP's collectives run on this rank's job thread: a Python subclass of
// _native.GroupTransport (weightlift._group.TorchGroupTransport), kept alive
// by the job. CKPT None or ERROR given: this rank cannot start; it joins
// the group's agreement with ERROR (code name, message) so every rank
// fails with the reason instead of waiting for it. Otherwise
// LoadWithGroup: TENSOR_PARALLEL with (RANK, SIZE, PLAN) as the shard rule;
// NAMES the tensors (empty: all). The tensors come as take_tensors gives
// them; next_ready as batches complete.
Job* StartLoadGroup(
    PyLoader& self, const PyCheckpoint* ckpt, nb::object transport,
    bool tensor_parallel, int rank, int size,
    const std::vector<std::tuple<std::string, std::string>>& plan,
    std::vector<std::string> names, uint64_t allgather_min_bytes,
    uint64_t batch_bytes,
    const std::optional<std::tuple<std::string, std::string>>& error) {
  GroupTransport* group = nb::cast<GroupTransport*>(transport);
  const Device device = self.loader->options().device;
  SetTransportDevice(*group, device);
  Status failed = Status::OK();
  if (error) {
    failed = StatusFromPair(*error);
  } else if (ckpt == nullptr) {
    failed = Status::InvalidArgument("group load: no checkpoint");
  }
  GroupLoadRequest req;
  req.tensor_parallel = tensor_parallel;
  req.names = std::move(names);
  req.allgather_min_bytes = allgather_min_bytes;
  req.batch_bytes = batch_bytes;
  if (failed.ok() && tensor_parallel) {
    // A rank or size that is not the group's is LoadWithGroup's error
    // (it names the group); the plan's words are checked here.
    const bool in_group = size == group->size() && rank == group->rank();
    StatusOr<TensorParallel> tp = ParseTensorParallel(
        in_group ? rank : 0, in_group ? size : group->size(), plan);
    if (tp.ok()) {
      req.tp = std::move(*tp);
      req.tp.rank = rank;
      req.tp.size = size;
    } else {
      failed = tp.status();
    }
  }
  std::shared_ptr<Loader> loader = self.loader;
  std::shared_ptr<const Checkpoint> c = ckpt ? ckpt->ckpt : nullptr;
  LoadFunction run = [loader, c, group, req = std::move(req), failed, device](
                         const LoadCallbacks& cb,
                         JobState& st) mutable -> StatusOr<LoadResult> {
    if (!failed.ok()) {
      // The agreement travels on the host unless the loader's device is
      // one NCCL can carry; a rank that failed still joins it.
      Status s = AgreeOnGroupLoad(*group, device, failed, "");
      return s.ok() ? failed : s;
    }
    req.on_tensor = [&st](size_t i, const LoadedTensor& t) {
      std::lock_guard<std::mutex> lock(st.mu);
      st.early[i] = t;
    };
    return LoadWithGroup(*loader, *c, *group, req, cb);
  };
  return new Job(self.loader, c, JobKind::kCustom, {}, {}, {},
                 std::move(transport), std::move(run));
}

}  // namespace

void BindTensorParallel(nb::module_& m);  // tp_bindings.cc
void BindHostReads(nb::module_& m);       // host_reads.cc
void BindSliceLoads(nb::module_& m);      // slice_loads.cc

}  // namespace weightlift::python

NB_MODULE(_native, m) {
  using namespace weightlift;
  using namespace weightlift::python;
  m.doc() = "weightlift C++ core (use the weightlift package, not this)";

  m.def("_set_error_factory",
        [](nb::object f) { ErrorFactory() = std::move(f); });
  m.def(
      "_live_buffers", [] { return LiveExportedBuffers(); },
      "Exported buffers still alive (for tests).");
  m.def("default_options", [] { return OptionsDict(LoadOptions{}); });
  m.def(
      "check_options",
      [](const nb::dict& options) {
        ThrowIfError(OptionsFromDict(options).Validate());
      },
      "options"_a,
      "Raises what a Loader made with OPTIONS (knob name -> text) would "
      "raise for its values (range, unknown backend, ...), without making "
      "one: no staging memory, no device.");
  m.def("option_names", [] {
    nb::list l;
    for (std::string_view n : LoadOptionNames()) l.append(std::string(n));
    return l;
  });
  m.def(
      "parse_size",
      [](const std::string& text) { return ValueOrRaise(ParseByteSize(text)); },
      "text"_a,
      "Bytes in TEXT (weightlift/byte_size.h: 8M = 8MiB, 8MB = 8e6).");
  m.def("format_size", &FormatByteSize, "bytes"_a);
  // The notes a report dict's counts say (its "counts", each file's copied
  // row runs, its "bytes"), as the C++ loaders word them: for LoadReport.
  // merge, which adds the counts of several loads up and says them once.
  m.def(
      "counted_notes",
      [](nb::dict report) {
        // A report dict's field as T, or TypeError naming it (a caller's
        // dict, not the loader's, may hold anything).
        auto count = [](nb::handle d, const char* key) -> uint64_t {
          try {
            return nb::cast<uint64_t>(d[key]);
          } catch (const std::exception&) {
            throw nb::type_error((std::string("counted_notes: '") + key +
                                  "' must be a count (an int >= 0)")
                                     .c_str());
          }
        };
        LoadReport r;
        r.bytes = count(report, "bytes");
        nb::dict counts = nb::cast<nb::dict>(report["counts"]);
        for (const auto& [name, member] : ReadCounts::Fields()) {
          const std::string key(name);
          if (counts.contains(key.c_str())) {
            r.counts.*member = count(counts, key.c_str());
          }
        }
        for (nb::handle f : nb::cast<nb::list>(report["files"])) {
          FileReport fr;
          fr.path = nb::cast<std::string>(f["path"]);
          fr.copied_row_runs = count(f, "copied_row_runs");
          fr.copied_row_reads = count(f, "copied_row_reads");
          r.files.push_back(std::move(fr));
        }
        return internal::CountedNotes(r);
      },
      "report"_a);
  // s3:// or http(s):// LOCATION's bytes (config.json for from_pretrained),
  // with the environment read as for Checkpoint.open.
  m.def(
      "read_small_object",
      [](const std::string& location, uint64_t max_bytes) {
        StatusOr<std::string> bytes = Status::Internal("unset");
        {
          nb::gil_scoped_release nogil;
          Status configured = ConfigureObjectStorageFromEnvironment();
          bytes = configured.ok() ? ReadSmallObject(location, max_bytes)
                                  : StatusOr<std::string>(configured);
        }
        std::string b = ValueOrRaise(std::move(bytes));
        return nb::bytes(b.data(), b.size());
      },
      "location"_a, "max_bytes"_a);
  m.def("dtype_bits", [](const std::string& name) -> int {
    std::optional<DType> d = ParseDType(name);
    if (!d) Raise(Status::InvalidArgument("unknown dtype '" + name + "'"));
    return DTypeBits(*d);
  });
  m.def("dtype_names", [] {
    nb::list l;
    for (int i = 0; i < kNumDTypes; ++i) {
      l.append(std::string(DTypeName(static_cast<DType>(i))));
    }
    return l;
  });

  BindTensorParallel(m);
  BindHostReads(m);
  BindSliceLoads(m);
  nb::class_<PyTpRequests>(m, "TpRequests")
      .def("__len__", [](const PyTpRequests& r) { return r.requests.size(); });
  m.def("tp_requests", &TpRequests, "checkpoint"_a, "rank"_a, "size"_a,
        "plan"_a);
  m.def("warm_row_pages", &WarmRowPages, "checkpoint"_a, "requests"_a,
        "resident_threshold"_a);
  m.def("register_pages", &RegisterPages, "checkpoint"_a, "requests"_a,
        "device"_a, "resident_threshold"_a, "forced"_a);

  nb::class_<PyCheckpoint>(m, "Checkpoint")
      .def_static("open", &OpenCheckpoint, "path"_a)
      .def_prop_ro("index_path",
                   [](const PyCheckpoint& c) { return c.ckpt->index_path(); })
      .def_prop_ro("total_bytes",
                   [](const PyCheckpoint& c) { return c.ckpt->total_bytes(); })
      .def("__len__",
           [](const PyCheckpoint& c) { return c.ckpt->tensors().size(); })
      // [(name, dtype, shape, file, offset, size)] sorted by (file, offset).
      .def("tensors",
           [](const PyCheckpoint& c) {
             nb::list l;
             for (const TensorInfo& t : c.ckpt->tensors()) {
               l.append(nb::make_tuple(t.name, std::string(DTypeName(t.dtype)),
                                       ShapeTuple(t.shape), t.file, t.offset,
                                       t.size));
             }
             return l;
           })
      .def("files",
           [](const PyCheckpoint& c) {
             nb::list l;
             for (const FileInfo& f : c.ckpt->files()) {
               nb::dict d;
               d["path"] = f.path;
               d["resolved_path"] = f.resolved_path;
               d["size"] = f.size;
               d["header_size"] = f.header_size;
               d["data_offset"] = f.data_offset;
               d["metadata"] = MetadataDict(f.metadata);
               d["has_metadata"] = f.has_metadata || !f.metadata.empty();
               l.append(d);
             }
             return l;
           })
      .def("metadata",
           [](const PyCheckpoint& c) {
             return MetadataDict(c.ckpt->metadata());
           })
      .def("index_of", [](const PyCheckpoint& c, const std::string& name) {
        return c.ckpt->IndexOf(name);
      });

  nb::class_<Job>(m, "Job")
      .def("wait", &Job::Wait, "timeout"_a)
      .def("next_ready", &Job::NextReady, "timeout"_a)
      .def("progress", &Job::Progress)
      .def("cancel", &Job::Cancel)
      .def("finish", &Job::Finish)
      .def("times", &Job::Times)
      .def("take_tensors", &Job::TakeTensors, "memoryview"_a = false)
      .def("take_ready", &Job::TakeReady, "index"_a);

  nb::class_<PyLoader>(m, "Loader")
      .def(nb::new_(&CreateLoader), "options"_a)
      .def("options",
           [](const PyLoader& l) { return OptionsDict(l.loader->options()); })
      .def(
          "take_setup_seconds",
          [](PyLoader& l) { return l.loader->TakeSetupSeconds(); },
          nb::call_guard<nb::gil_scoped_release>())
      .def("start_load", &StartLoad, "checkpoint"_a, "names"_a,
           nb::rv_policy::take_ownership)
      .def("start_load_slices", &StartLoadSlices, "checkpoint"_a, "requests"_a,
           nb::rv_policy::take_ownership)
      .def("start_load_tp", &StartLoadTp, "checkpoint"_a, "requests"_a,
           nb::rv_policy::take_ownership)
      .def("start_load_tp_into", &StartLoadTpInto, "checkpoint"_a, "requests"_a,
           "base"_a, "keepalive"_a, nb::rv_policy::take_ownership)
      .def("start_load_into", &StartLoadInto, "checkpoint"_a, "dests"_a,
           "keepalive"_a, nb::rv_policy::take_ownership)
      .def("start_load_group", &StartLoadGroup, "checkpoint"_a.none(),
           "transport"_a, "tensor_parallel"_a, "rank"_a, "size"_a, "plan"_a,
           "names"_a, "allgather_min_bytes"_a, "batch_bytes"_a,
           "error"_a.none(), nb::rv_policy::take_ownership);
}
