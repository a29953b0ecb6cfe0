// load_slices_into: get_slice(...)[index] onto a CUDA device, on the
// calling thread, into memory the caller allocated.
//
// A slice of one weight (22.5 MB for a 4096 x 11008 bf16 row block) moves
// in about a millisecond, so what surrounds the transfer shows: a Job
// starts a thread per load and hands its end over through a condition
// variable, cudaMalloc and cudaFree cost ~0.1-0.2 ms each, and the report
// dict with its text costs tens of microseconds whether anyone reads it or
// not. This call runs Loader::LoadSlicesInto on the calling thread (the GIL
// released; the loader's own workers still read), into destinations the
// caller took from its allocator (PyTorch's caching allocator), and returns
// the report as a Report that becomes a dict only when asked for
// (weightlift.last_report()).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "module_common.h"

namespace weightlift::python {
namespace {

using Dims = std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>;

// REQUESTS: [(name, dims, address, size)]: DIMS as start_load_slices takes
// them (normalized (start, stop, step) per dimension, the rest whole), the
// selection landing C-contiguous at ADDRESS (SIZE bytes, which must be the
// selection's). The caller keeps that memory alive and, for device memory,
// ordered after whatever its own streams still do with it (see
// _safe_open.SafeSlice._to_device). Returns a Report.
nb::object LoadSlicesInto(
    PyLoader& self, const PyCheckpoint& ckpt,
    const std::vector<std::tuple<std::string, Dims, uintptr_t, uint64_t>>&
        requests) {
  std::vector<TensorRequest> reqs;
  std::vector<Destination> dests;
  reqs.reserve(requests.size());
  dests.reserve(requests.size());
  for (const auto& [name, dims, address, size] : requests) {
    TensorRequest r;
    r.name = name;
    r.slices.reserve(dims.size());
    for (const auto& [start, stop, step] : dims) {
      r.slices.push_back(DimSlice{start, stop, step});
    }
    reqs.push_back(std::move(r));
    dests.push_back(Destination{{}, reinterpret_cast<void*>(address), size});
  }
  auto report = std::make_unique<NativeReport>();
  Status s;
  {
    nb::gil_scoped_release nogil;
    s = self.loader->LoadSlicesInto(*ckpt.ckpt, reqs, dests, &report->report);
  }
  ThrowIfError(s);
  return nb::cast(report.release(), nb::rv_policy::take_ownership);
}

}  // namespace

void BindSliceLoads(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<NativeReport>(m, "Report")
      .def("as_dict",
           [](const NativeReport& r) { return ReportDict(r.report); });
  m.def("load_slices_into", &LoadSlicesInto, "loader"_a, "checkpoint"_a,
        "requests"_a);
}

}  // namespace weightlift::python
