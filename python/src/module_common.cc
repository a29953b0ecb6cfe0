// The helpers every binding file of weightlift._native shares
// (module_common.h): Status -> the package's exception, buffers exported to
// Python with their owners, the report and options dicts. Kept apart from
// module.cc so the binding files (module.cc, host_reads.cc, tp_bindings.cc)
// depend on this one and not on each other.
#include "module_common.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weightlift/format_error.h"

namespace weightlift::python {

// ---- errors ---------------------------------------------------------------

// weightlift._errors.from_status(code_name, rule_name_or_None, message):
// returns the exception instance to raise. Installed once at import.
nb::object& ErrorFactory() {
  static nb::object* factory = new nb::object();  // leaked: outlives atexit
  return *factory;
}

[[noreturn]] void Raise(const Status& status) {
  nb::object rule = nb::none();
  if (status.rule() != FormatError::kNone) {
    rule = nb::str(FormatErrorName(status.rule()));
  }
  nb::object& factory = ErrorFactory();
  if (!factory.is_valid() || factory.is_none()) {
    throw std::runtime_error(status.ToString());
  }
  nb::object exc =
      factory(StatusCodeName(status.code()), rule, status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw nb::python_error();
}

void ThrowIfError(const Status& status) {
  if (!status.ok()) Raise(status);
}

Status StatusFromPair(const std::tuple<std::string, std::string>& error) {
  StatusCode code = StatusCode::kInvalidArgument;
  for (int c = 1; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (std::get<0>(error) == StatusCodeName(static_cast<StatusCode>(c))) {
      code = static_cast<StatusCode>(c);
    }
  }
  return Status(code, std::get<1>(error));
}

// ---- buffer ownership -----------------------------------------------------

namespace {

// Number of live OwnerRefs: how many exported buffers Python still holds.
std::atomic<int64_t> g_live_owners{0};

struct OwnerRef {
  explicit OwnerRef(std::shared_ptr<void> p) : owner(std::move(p)) {
    g_live_owners.fetch_add(1, std::memory_order_relaxed);
  }
  ~OwnerRef() { g_live_owners.fetch_sub(1, std::memory_order_relaxed); }
  std::shared_ptr<void> owner;
};

}  // namespace

int64_t LiveExportedBuffers() { return g_live_owners.load(); }

// [data, data + size) on DEVICE as a 1-D uint8 DLPack capsule (for
// torch.utils.dlpack.from_dlpack), or for host memory and AS_MEMORYVIEW a
// writable memoryview (for numpy.frombuffer). Either keeps OWNER alive until
// the last consumer lets go. Returns None for empty tensors (DLPack consumers
// disagree on null data pointers; Python builds empty tensors itself).
nb::object ExportBytes(void* data, uint64_t size, const Device& device,
                       std::shared_ptr<void> owner, bool as_memoryview) {
  if (size == 0 || data == nullptr) return nb::none();
  auto* ref = new OwnerRef(std::move(owner));
  nb::capsule cap(ref,
                  [](void* p) noexcept { delete static_cast<OwnerRef*>(p); });
  size_t shape[1] = {static_cast<size_t>(size)};
  if (as_memoryview && !device.is_cuda()) {
    nb::ndarray<nb::memview, uint8_t, nb::ndim<1>, nb::c_contig> view(
        data, 1, shape, cap);
    return nb::cast(view);
  }
  int device_type =
      device.is_cuda() ? nb::device::cuda::value : nb::device::cpu::value;
  nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig> arr(
      data, 1, shape, cap, nullptr, nb::dtype<uint8_t>(), device_type,
      device.is_cuda() ? device.index : 0);
  return nb::cast(arr);
}

// ---- conversions ----------------------------------------------------------

nb::tuple ShapeTuple(const std::vector<uint64_t>& shape) {
  nb::list l;
  for (uint64_t d : shape) l.append(d);
  return nb::tuple(l);
}

nb::dict MetadataDict(const std::map<std::string, std::string>& m) {
  nb::dict d;
  for (const auto& [k, v] : m)
    d[nb::str(k.c_str(), k.size())] = nb::str(v.c_str(), v.size());
  return d;
}

nb::dict ReportDict(const LoadReport& r) {
  nb::dict d;
  d["device"] = r.device.ToString();
  d["tensors"] = r.tensors;
  d["bytes"] = r.bytes;
  d["bytes_read"] = r.bytes_read;
  d["seconds"] = r.seconds;
  d["setup_seconds"] = r.setup_seconds;
  d["open_seconds"] = r.open_seconds;
  d["alloc_seconds"] = r.alloc_seconds;
  d["transfer_seconds"] = r.transfer_seconds;
  d["staging_bytes"] = r.staging_bytes;
  d["device_bytes"] = r.device_bytes;
  d["threads"] = r.threads;
  if (r.options) {
    d["options"] = OptionsDict(*r.options);
  } else {
    d["options"] = nb::none();
  }
  d["gb_per_s"] = r.gb_per_s();
  nb::list files;
  for (const FileReport& f : r.files) {
    nb::dict fd;
    fd["path"] = f.path;
    fd["path_taken"] = f.path_taken;
    fd["reason"] = f.reason;
    fd["bytes"] = f.bytes;
    fd["copied_row_runs"] = f.copied_row_runs;
    fd["copied_row_reads"] = f.copied_row_reads;
    files.append(fd);
  }
  d["files"] = files;
  nb::dict counts;
  for (const auto& [name, member] : ReadCounts::Fields()) {
    counts[std::string(name).c_str()] = r.counts.*member;
  }
  d["counts"] = counts;
  nb::list notes;
  for (const std::string& n : r.notes) notes.append(n);
  d["notes"] = notes;
  d["text"] = r.ToString();
  return d;
}

// LoadOptions by SetLoadOption's knob names (the keys of the report's
// "options" in LoadReport::ToJson), sizes in bytes.
nb::dict OptionsDict(const LoadOptions& o) {
  nb::dict d;
  d["device"] = o.device.ToString();
  d["backend"] = std::string(BackendName(o.backend));
  d["gds"] = std::string(GdsModeName(o.gds));
  d["host_register"] = std::string(HostRegisterModeName(o.host_register));
  d["threads"] = o.threads;
  d["chunk"] = o.chunk_bytes;
  d["cuda_chunk"] = o.cuda_chunk_bytes;
  d["staging"] = o.staging_bytes;
  d["queue_depth"] = o.queue_depth;
  d["direct_min_bytes"] = o.direct_min_bytes;
  d["copy_streams"] = o.copy_streams;
  d["resident_threshold"] = o.resident_threshold;
  d["zero_copy"] = o.zero_copy;
  d["host_register_piece"] = o.host_register_piece_bytes;
  d["host_buffer_cache"] = o.host_buffer_cache_bytes;
  d["uring_register_min"] = o.uring_register_min_bytes;
  d["local_world_size"] = o.local_world_size;
  return d;
}

// Keys are SetLoadOption's knob names, values their text (Python's
// _options.normalize turns ints, bools and floats into text): the same
// mapping and size parser as the command's flags. Loader::Create validates.
LoadOptions OptionsFromDict(const nb::dict& d) {
  LoadOptions o;
  for (auto [key, value] : d) {
    if (value.is_none()) continue;
    ThrowIfError(SetLoadOption(o, nb::cast<std::string>(key),
                               nb::cast<std::string>(value)));
  }
  return o;
}

}  // namespace weightlift::python
