// What the binding files of weightlift._native share (module_common.cc
// defines them): raising a Status as the package's exception, exporting bytes
// to Python, the report and options dicts, the Checkpoint wrapper.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/options.h"
#include "weightlift/report.h"
#include "weightlift/status.h"

namespace weightlift::python {

namespace nb = nanobind;

// weightlift._errors.from_status(code_name, rule_name_or_None, message),
// installed once at import; Raise calls it to build the exception.
nb::object& ErrorFactory();

// Raises STATUS as the exception weightlift._errors.from_status builds.
[[noreturn]] void Raise(const Status& status);
void ThrowIfError(const Status& status);

// The Status a Python (code name, message) pair stands for: the inverse of
// StatusCodeName, as weightlift._group hands a rank's own failure to the
// group's C++ load. A name that is no StatusCode's is InvalidArgument.
Status StatusFromPair(const std::tuple<std::string, std::string>& error);

template <typename T>
T ValueOrRaise(StatusOr<T> v) {
  if (!v.ok()) Raise(v.status());
  return std::move(v).value();
}

// [data, data + size) on DEVICE as a 1-D uint8 DLPack capsule, or for host
// memory and AS_MEMORYVIEW a writable memoryview; keeps OWNER alive until
// the last consumer lets go. None for empty tensors.
nb::object ExportBytes(void* data, uint64_t size, const Device& device,
                       std::shared_ptr<void> owner, bool as_memoryview);

// How many exported buffers Python still holds (tests read it to prove
// memory is released when the last view dies).
int64_t LiveExportedBuffers();

nb::tuple ShapeTuple(const std::vector<uint64_t>& shape);
nb::dict MetadataDict(const std::map<std::string, std::string>& m);

// The report as the dict weightlift.report.LoadReport takes.
nb::dict ReportDict(const LoadReport& r);

// LoadOptions by SetLoadOption's knob names (the keys of the report's
// "options" in LoadReport::ToJson), sizes in bytes.
nb::dict OptionsDict(const LoadOptions& o);

// LoadOptions from a dict of SetLoadOption knob names -> text.
LoadOptions OptionsFromDict(const nb::dict& d);

// weightlift._native.Checkpoint.
struct PyCheckpoint {
  std::shared_ptr<const Checkpoint> ckpt;
};

// weightlift._native.Loader.
struct PyLoader {
  std::shared_ptr<Loader> loader;
};

// weightlift._native.Report: a finished load's LoadReport, turned into the
// dict weightlift.report.LoadReport takes only when Python asks
// (last_report()), so a short load does not pay for strings nobody reads.
struct NativeReport {
  LoadReport report;
};

}  // namespace weightlift::python
