// HostReads: safe_open's per-call path for host tensors.
//
// safe_open(..., device="cpu").get_tensor(name) is called once per tensor,
// often for thousands of small tensors, so a call must cost what it costs in
// safetensors (microseconds), not a loader job (a thread, a plan, staging).
// HostReads serves such calls on the calling thread, straight from the file
// the Checkpoint holds open: its header was validated by Checkpoint::Open,
// and every call checks that the file is unchanged since then (one fstat)
// before handing anything out. Two ways:
//   - view: a view of the handle's private (copy-on-write) mapping of the
//     file, mapped at the handle's first call and shared by its tensors, as
//     safetensors does on cpu. Nothing is read at call time; pages come when
//     first touched; a write changes the process's copy, never the file. A
//     tensor whose address would not be a multiple of its element size is
//     copied instead (as zero_copy loads do), and the report says so.
//   - copy: the tensor's bytes copied on the calling thread (GIL released)
//     into new memory, the file checked unchanged before and after (a
//     change during the copy is an error, not a mix): from a shared
//     read-only mapping of the file below kHugeCopyBytes (a user-space copy
//     of mapped pages, as safetensors' numpy path), with pread above (a
//     file cut short under a long copy is then an error, not a SIGBUS).
// Every call leaves a LoadReport (path "mmap-view" or "pread", bytes,
// seconds) that Python turns into last_report() when asked.
// Get returns None where this path does not apply (a file without a POSIX
// descriptor: object storage, memory; a file system that cannot map; a
// checkpoint built by hand): the caller then loads through a Loader.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "env/file.h"
#include "env/mapped_rows_file.h"
#include "env/mapping.h"
#include "format/held_files.h"
#include "module_common.h"
#include "plan/selection.h"
#include "util/clock.h"
#include "weightlift/checkpoint.h"
#include "weightlift/dtype.h"
#include "weightlift/report.h"

namespace weightlift::python {
namespace {

using internal::Clock;
using internal::File;
using internal::Mapping;
using internal::RowBlock;
using internal::SecondsSince;
using internal::TensorSelection;

// Memory a copied tensor owns, freed when the last tensor viewing it goes:
// std::aligned_alloc (64-byte aligned) for small tensors; from
// kHugeCopyBytes on, fresh anonymous pages with transparent huge pages asked
// for, so that the read's first touch of the memory faults once per 2 MiB
// instead of once per 4 KiB (the larger cost of a big copy on a VM).
constexpr uint64_t kHugeCopyBytes = 4u << 20;  // the report says "4 MiB"
// Copies from this size on release the GIL (below, releasing and taking it
// back costs more than the copy).
constexpr uint64_t kReleaseGilBytes = 256u << 10;

struct OwnedBytes {
  void* data = nullptr;
  Mapping pages;  // when from Mapping::Anonymous
  ~OwnedBytes() {
    if (pages.empty()) std::free(data);
  }
};

StatusOr<std::shared_ptr<OwnedBytes>> Allocate(uint64_t size,
                                               const std::string& name) {
  auto owned = std::make_shared<OwnedBytes>();
  if (size >= kHugeCopyBytes) {
    WL_ASSIGN_OR_RETURN(owned->pages,
                        Mapping::Anonymous(size, "tensor '" + name + "'",
                                           /*huge=*/true));
    owned->data = owned->pages.data();
    return owned;
  }
  owned->data = std::aligned_alloc(64, (size + 63) / 64 * 64);
  if (owned->data == nullptr) {
    return Status::ResourceExhausted("cannot allocate " + std::to_string(size) +
                                     " bytes for tensor '" + name + "'");
  }
  return owned;
}

// ---- get_slice's index, read in C++ ------------------------------------
//
// The indices a slice call nearly always gets (ints, slices of ints and
// None, one Ellipsis, or a tuple of them) are read here, by the same rules
// as weightlift._slice_index (torch's basic indexing for "pt", safetensors'
// own for "np"), so that a small slice costs what it costs in safetensors.
// Everything else, and everything those rules refuse, is left to
// _slice_index (ReadIndex / SliceRanges return false), which raises the
// errors with their exact words or hands the index to torch.

struct IndexPart {
  enum Kind { kInt, kSlice, kEllipsis } kind = kInt;
  long long value = 0;  // kInt
  // kSlice: bounds (when given) and step.
  bool has_start = false, has_stop = false;
  long long start = 0, stop = 0, step = 1;
};

// V as an exact int (not bool, not an __index__ object); false otherwise
// or on overflow.
bool ExactInt(PyObject* v, long long* out) {
  if (!PyLong_CheckExact(v)) return false;
  int overflow = 0;
  *out = PyLong_AsLongLongAndOverflow(v, &overflow);
  return overflow == 0 && !(*out == -1 && PyErr_Occurred());
}

// INDEX (one item or a tuple of items) as parts; false for anything but
// exact ints, slices of exact ints / None (step None or an exact int) and
// Ellipsis.
bool ReadIndex(PyObject* index, std::vector<IndexPart>* parts) {
  const bool tuple = PyTuple_CheckExact(index);
  const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(index) : 1;
  parts->resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = tuple ? PyTuple_GET_ITEM(index, i) : index;
    IndexPart& p = (*parts)[static_cast<size_t>(i)];
    p = IndexPart{};  // the vector is reused from call to call
    if (item == Py_Ellipsis) {
      p.kind = IndexPart::kEllipsis;
    } else if (PySlice_Check(item)) {
      auto* sl = reinterpret_cast<PySliceObject*>(item);
      p.kind = IndexPart::kSlice;
      if (sl->start != Py_None) {
        if (!ExactInt(sl->start, &p.start)) return false;
        p.has_start = true;
      }
      if (sl->stop != Py_None) {
        if (!ExactInt(sl->stop, &p.stop)) return false;
        p.has_stop = true;
      }
      if (sl->step != Py_None && !ExactInt(sl->step, &p.step)) return false;
    } else if (!ExactInt(item, &p.value)) {
      return false;
    }
  }
  return true;
}

// PARTS against SHAPE as one DimSlice per dimension plus the dimensions an
// int drops, by framework NUMPY's rules; false where _slice_index decides
// (it raises, or for "pt" torch does).
bool SliceRanges(const std::vector<IndexPart>& parts,
                 const std::vector<uint64_t>& shape, bool numpy,
                 std::vector<DimSlice>* ranges, std::vector<bool>* squeeze) {
  const size_t ndim = shape.size();
  size_t ellipses = 0;
  for (const IndexPart& p : parts) ellipses += p.kind == IndexPart::kEllipsis;
  if (ellipses > 1) return false;
  const size_t fixed = parts.size() - ellipses;
  if (fixed > ndim) return false;  // too many indices: both raise
  // Ellipsis: whole dimensions for what the others leave (safetensors'
  // max(0, ndim - len(parts) + 1) is the same once fixed <= ndim).
  ranges->clear();
  squeeze->assign(ndim, false);
  for (const IndexPart& p : parts) {
    const size_t d = ranges->size();
    if (p.kind == IndexPart::kEllipsis) {
      for (size_t k = 0; k < ndim - fixed; ++k) {
        // safetensors checks the ':' an Ellipsis stands for like any
        // other (start 0 of an empty dimension is out of bounds).
        if (numpy && shape[ranges->size()] == 0) return false;
        ranges->push_back(DimSlice{0, shape[ranges->size()], 1});
      }
      continue;
    }
    const long long n = static_cast<long long>(shape[d]);
    if (p.kind == IndexPart::kInt) {
      long long i = p.value;
      if (numpy && (i < INT_MIN || i > INT_MAX)) return false;  // pyo3 i32
      if (i < 0) i += n;
      if (i < 0 || i >= n) return false;
      ranges->push_back(
          DimSlice{static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1, 1});
      (*squeeze)[d] = true;
      continue;
    }
    if (p.step <= 0) return false;
    long long start, stop;
    if (numpy) {
      // Unsigned bounds, no clamping: safetensors raises where torch clamps.
      if ((p.has_start && p.start < 0) || (p.has_stop && p.stop < 0)) {
        return false;
      }
      start = p.has_start ? p.start : 0;
      stop = p.has_stop ? p.stop : n;
      if (start >= n || stop > n || stop < start) return false;
    } else {  // slice.indices(n) for a positive step, then stop >= start
      auto clamp = [n](long long v) {
        if (v < 0) v += n;
        return v < 0 ? 0 : v > n ? n : v;
      };
      start = p.has_start ? clamp(p.start) : 0;
      stop = p.has_stop ? clamp(p.stop) : n;
      if (stop < start) stop = start;
    }
    ranges->push_back(DimSlice{static_cast<uint64_t>(start),
                               static_cast<uint64_t>(stop),
                               static_cast<uint64_t>(p.step)});
  }
  while (ranges->size() < ndim) {
    ranges->push_back(DimSlice{0, shape[ranges->size()], 1});
  }
  return true;
}

// What one HostReads::Get did, kept as plain numbers; the LoadReport (and
// from it the dict) is built only when Python asks (last_report()), so a
// call does not pay for strings it never shows.
struct HostReport {
  // Not the Checkpoint: a report kept as last_report() must not keep the
  // checkpoint's files open.
  std::shared_ptr<const std::vector<std::string>> paths;  // per file
  std::shared_ptr<const LoadOptions> options;
  bool view = false;
  struct Tensor {
    uint32_t file;  // index into paths
    uint64_t size;
  };
  std::vector<Tensor> tensors;
  uint64_t bytes_read = 0;
  uint64_t copied = 0, copied_tensors = 0;  // view: misaligned, copied
  double open_seconds = 0, transfer_seconds = 0, seconds = 0;
  // Peek (get_slice): the caller copied SLICE_BYTES of the tensor out of
  // the mapping, in SLICE_SECONDS (set by Sliced).
  bool sliced = false;
  uint64_t slice_bytes = 0;
  double slice_seconds = 0;

  void Sliced(uint64_t bytes, double seconds_taken) {
    slice_bytes = bytes;
    slice_seconds = seconds_taken;
  }

  LoadReport Build() const {
    LoadReport r;
    r.device = Device::Cpu();
    r.options = *options;
    r.bytes_read = bytes_read;
    r.open_seconds = open_seconds;
    r.transfer_seconds = transfer_seconds;
    r.seconds = seconds;
    std::vector<int> report_of_file(paths->size(), -1);
    for (const Tensor& ti : tensors) {
      if (report_of_file[ti.file] < 0) {
        report_of_file[ti.file] = static_cast<int>(r.files.size());
        FileReport fr;
        fr.path = (*paths)[ti.file];
        fr.path_taken = view ? "mmap-view" : "copy";
        fr.reason = view ? "safe_open on cpu: a view of the handle's private "
                           "(copy-on-write) mapping of the file, as "
                           "safetensors; pages are read when first touched"
                         : "safe_open on cpu: copied on the calling thread "
                           "from the file the checkpoint holds open (from "
                           "its mapping below 4 MiB, pread above)";
        r.files.push_back(std::move(fr));
      }
      const uint64_t bytes = sliced ? slice_bytes : ti.size;
      r.files[report_of_file[ti.file]].bytes += bytes;
      r.bytes += bytes;
      ++r.tensors;
    }
    if (sliced) {
      r.files[0].path_taken = "mmap-slice";
      r.files[0].reason =
          "get_slice on cpu: the selected elements copied on the calling "
          "thread from the handle's mapping of the file";
      r.bytes_read = slice_bytes;
      r.transfer_seconds += slice_seconds;
      r.seconds += slice_seconds;
    }
    if (copied_tensors > 0) {
      r.notes.push_back(std::to_string(copied_tensors) + " tensors (" +
                        std::to_string(copied) +
                        " bytes) are misaligned for their dtype in the file "
                        "and were copied instead of mapped");
    }
    r.notes.push_back(
        "safe_open on cpu: served on the calling thread, no loader job");
    return r;
  }
};

class HostReads {
 public:
  HostReads(std::shared_ptr<const Checkpoint> ckpt, LoadOptions options,
            bool view)
      : ckpt_(std::move(ckpt)),
        options_(std::make_shared<const LoadOptions>(std::move(options))),
        view_(view),
        files_(ckpt_->files().size()) {
    auto paths = std::make_shared<std::vector<std::string>>();
    for (const FileInfo& f : ckpt_->files()) paths->push_back(f.path);
    paths_ = std::move(paths);
  }

  // [data] for NAMES (ExportBytes: DLPack capsules, or for AS_MEMORYVIEW
  // (numpy) memoryviews or bytearrays; None for empty tensors) and the
  // HostReport; None when
  // this path does not apply to one of the files (see the file comment).
  nb::object Get(const std::vector<std::string>& names, bool as_memoryview) {
    const auto t0 = Clock::now();
    auto rep = NewReport();
    std::vector<const TensorInfo*> infos;
    infos.reserve(names.size());
    rep->tensors.reserve(names.size());
    for (const std::string& n : names) infos.push_back(&Add(rep.get(), n));
    std::vector<bool> ready(files_.size(), false);
    for (const TensorInfo* ti : infos) {
      if (!ready[ti->file] && !Ready(ti->file)) return nb::none();
      ready[ti->file] = true;
    }
    rep->open_seconds = SecondsSince(t0);
    const auto t1 = Clock::now();
    nb::list out;
    for (const TensorInfo* ti : infos) {
      out.append(Export(*ti, as_memoryview, rep.get()));
    }
    return Finish(out, std::move(rep), t0, t1);
  }

  // Get([NAME]) without the lists: (data, HostReport) or None.
  nb::object GetOne(const std::string& name, bool as_memoryview) {
    const auto t0 = Clock::now();
    auto rep = NewReport();
    const TensorInfo& ti = Add(rep.get(), name);
    if (!Ready(ti.file)) return nb::none();
    rep->open_seconds = SecondsSince(t0);
    const auto t1 = Clock::now();
    nb::object data = Export(ti, as_memoryview, rep.get());
    return Finish(data, std::move(rep), t0, t1);
  }

  // get_slice on cpu: tensor NAME's bytes in the handle's mapping of its
  // file, whatever the mode (for copy mode a read-only mapping: the caller
  // copies the selected elements out and never writes or keeps this), and
  // the HostReport, which the caller completes with HostReport.sliced.
  // None where this path does not apply, and for a tensor misaligned for
  // its dtype (the loader then reads the slice).
  nb::object Peek(const std::string& name, bool as_memoryview) {
    const auto t0 = Clock::now();
    auto rep = NewReport();
    const TensorInfo& ti = Add(rep.get(), name);
    rep->sliced = true;
    if (ti.size == 0 || !Ready(ti.file)) return nb::none();
    FileState& fs = files_[ti.file];
    if (!view_) ThrowIfError(internal::CheckUnchanged(*fs.file));
    std::byte* at = fs.map->data() + ti.offset;
    const int bits = DTypeBits(ti.dtype);
    if (bits % 8 != 0 || reinterpret_cast<uintptr_t>(at) % (bits / 8) != 0) {
      return nb::none();
    }
    rep->open_seconds = SecondsSince(t0);
    nb::object data =
        ExportBytes(at, ti.size, Device::Cpu(),
                    std::shared_ptr<void>(fs.map, at), as_memoryview);
    return Finish(data, std::move(rep), t0, Clock::now());
  }

  // get_slice(NAME)[INDEX] on cpu: (data, shape, HostReport) with the
  // elements INDEX selects copied on the calling thread out of the
  // handle's mapping of the file into memory of their own (a bytearray,
  // from kHugeCopyBytes on huge-page memory as a writable memoryview; None
  // when empty), SHAPE the result's (dimensions an int drops left out).
  // None where this path does not serve it: an index beyond ReadIndex /
  // SliceRanges (weightlift._slice_index reads it, and raises what it
  // refuses), a dtype of less than a byte, a file this path does not
  // serve. Raises NotFound for an unknown NAME.
  nb::object Slice(const std::string& name, nb::handle index, bool numpy) {
    const auto t0 = Clock::now();
    const TensorInfo* found = ckpt_->Find(name);
    if (found == nullptr) {
      Raise(Status::NotFound("File does not contain tensor " + name));
    }
    const TensorInfo& ti = *found;
    const int bits = DTypeBits(ti.dtype);
    if (bits <= 0 || bits % 8 != 0) return nb::none();
    thread_local std::vector<IndexPart> parts;
    thread_local std::vector<DimSlice> ranges;
    thread_local std::vector<bool> squeeze;
    if (!ReadIndex(index.ptr(), &parts) ||
        !SliceRanges(parts, ti.shape, numpy, &ranges, &squeeze)) {
      return nb::none();
    }
    const auto index_of = static_cast<uint32_t>(&ti - ckpt_->tensors().data());
    StatusOr<TensorSelection> sel =
        internal::SelectSlice(ti, index_of, bits, ranges);
    if (!sel.ok()) return nb::none();  // _slice_index names the problem
    auto rep = NewReport();
    rep->tensors.push_back({ti.file, ti.size});
    rep->sliced = true;
    if (!Ready(ti.file)) return nb::none();
    rep->open_seconds = SecondsSince(t0);
    const auto t1 = Clock::now();
    nb::object data = CopySelection(*sel, ti, rep.get());
    size_t kept = 0;
    for (size_t d = 0; d < ti.shape.size(); ++d) kept += !squeeze[d];
    nb::object shape = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(kept)));
    if (!shape.is_valid()) throw nb::python_error();
    for (size_t d = 0, k = 0; d < ti.shape.size(); ++d) {
      if (squeeze[d]) continue;
      PyObject* dim = PyLong_FromUnsignedLongLong(sel->shape[d]);
      if (dim == nullptr) throw nb::python_error();
      PyTuple_SET_ITEM(shape.ptr(), static_cast<Py_ssize_t>(k++), dim);
    }
    rep->slice_bytes = sel->bytes;
    rep->transfer_seconds = SecondsSince(t1);
    rep->seconds = SecondsSince(t0);
    return nb::make_tuple(
        std::move(data), std::move(shape),
        nb::cast(rep.release(), nb::rv_policy::take_ownership));
  }

 private:
  struct FileState {
    std::shared_ptr<File> file;    // pread, checked at the first use
    std::shared_ptr<Mapping> map;  // the whole file (see Prepare)
  };

  std::unique_ptr<HostReport> NewReport() const {
    auto rep = std::make_unique<HostReport>();
    rep->paths = paths_;
    rep->options = options_;
    rep->view = view_;
    return rep;
  }

  // Tensor NAME, counted in REP. Raises NotFound.
  const TensorInfo& Add(HostReport* rep, const std::string& name) const {
    const TensorInfo* ti = ckpt_->Find(name);
    if (ti == nullptr) {
      Raise(Status::NotFound("File does not contain tensor " + name));
    }
    rep->tensors.push_back({ti->file, ti->size});
    return *ti;
  }

  // Whether file I can be served here: prepared at its first use (opened,
  // mapped) and checked unchanged now. A copy checks again after it copies
  // (a change during the copy is an error, never a mix of bytes); this
  // check before it is what keeps a file truncated since the last call from
  // being read through the mapping, where pages past the new end raise
  // SIGBUS. Raises the file's error.
  bool Ready(uint32_t i) {
    FileState* fs = Prepared(i);
    if (fs == nullptr) {
      StatusOr<FileState*> st = Status::Internal("unset");
      {
        nb::gil_scoped_release nogil;
        st = Prepare(i);
      }
      if (!st.ok()) Raise(st.status());
      fs = *st;
      if (fs == nullptr) return false;
    }
    ThrowIfError(internal::CheckUnchanged(*fs->file));
    return true;
  }

  nb::object Finish(nb::object data, std::unique_ptr<HostReport> rep,
                    Clock::time_point t0, Clock::time_point t1) {
    rep->transfer_seconds = SecondsSince(t1);
    rep->seconds = SecondsSince(t0);
    return nb::make_tuple(
        std::move(data),
        nb::cast(rep.release(), nb::rv_policy::take_ownership));
  }

  // TI's bytes as ExportBytes gives them (None when empty): a view of the
  // mapping, or new memory copied from the file (for numpy below
  // kHugeCopyBytes a bytearray); counted in REP.
  // REQUIRES: TI's file prepared and checked unchanged (Ready) by this call.
  nb::object Export(const TensorInfo& ti, bool as_memoryview, HostReport* rep) {
    if (ti.size == 0) return nb::none();
    FileState& fs = files_[ti.file];
    const Device cpu = Device::Cpu();
    if (view_) {
      const int bits = DTypeBits(ti.dtype);
      const uintptr_t elem = bits >= 8 ? static_cast<uintptr_t>(bits / 8) : 1;
      // Checkpoint::Open checked offset + size against the file's size,
      // which CheckUnchanged re-checked: inside the mapping.
      std::byte* at = fs.map->data() + ti.offset;
      if (reinterpret_cast<uintptr_t>(at) % elem == 0) {
        return ExportBytes(at, ti.size, cpu, std::shared_ptr<void>(fs.map, at),
                           as_memoryview);
      }
      std::shared_ptr<OwnedBytes> owned =
          ValueOrRaise(Allocate(ti.size, ti.name));
      std::memcpy(owned->data, at, ti.size);
      rep->copied += ti.size;
      rep->bytes_read += ti.size;
      ++rep->copied_tensors;
      void* data = owned->data;  // before OWNED is moved from
      return ExportBytes(data, ti.size, cpu, std::move(owned), as_memoryview);
    }
    if (as_memoryview && ti.size < kHugeCopyBytes) {
      // numpy: a bytearray, as safetensors' numpy path returns (numpy views
      // it writable; 16-byte aligned, enough for every numpy dtype).
      nb::object ba = nb::steal(PyByteArray_FromStringAndSize(
          nullptr, static_cast<Py_ssize_t>(ti.size)));
      if (!ba.is_valid()) throw nb::python_error();
      std::memcpy(PyByteArray_AS_STRING(ba.ptr()), fs.map->data() + ti.offset,
                  ti.size);
      RaiseIfError(internal::CheckUnchanged(*fs.file), ti);
      rep->bytes_read += ti.size;
      return ba;
    }
    std::shared_ptr<OwnedBytes> owned =
        ValueOrRaise(Allocate(ti.size, ti.name));
    Status read;
    {
      // Other Python threads run during a copy that takes a while.
      std::optional<nb::gil_scoped_release> nogil;
      if (ti.size >= kReleaseGilBytes) nogil.emplace();
      if (ti.size < kHugeCopyBytes) {
        // From the mapping: a user-space copy of mapped pages is about
        // twice as fast as pread's for these sizes (as safetensors copies).
        std::memcpy(owned->data, fs.map->data() + ti.offset, ti.size);
      } else {
        // Large: pread, so a file cut short under a long copy is an error
        // naming it rather than a SIGBUS.
        read = fs.file->ReadAt(
            ti.offset, std::span<std::byte>(
                           static_cast<std::byte*>(owned->data), ti.size));
      }
      // A file changed during the copy: an error, never a mix of bytes.
      if (read.ok()) read = internal::CheckUnchanged(*fs.file);
    }
    RaiseIfError(read, ti);
    rep->bytes_read += ti.size;
    void* data = owned->data;  // before OWNED is moved from
    return ExportBytes(data, ti.size, cpu, std::move(owned), as_memoryview);
  }

  // SEL's bytes (of tensor TI, in the prepared file) copied row by row
  // into new memory, as Slice returns it: out of the file's mapping below
  // kHugeCopyBytes, with pread above (a file cut short under a long copy is
  // then an error naming it, not a SIGBUS). The file is checked unchanged
  // before (Ready) and after the copy, so a change during it is an error.
  nb::object CopySelection(const TensorSelection& sel, const TensorInfo& ti,
                           HostReport* rep) {
    if (sel.bytes == 0) return nb::none();
    FileState& fs = files_[ti.file];
    rep->bytes_read += sel.bytes;
    if (sel.bytes < kHugeCopyBytes) {
      nb::object ba = nb::steal(PyByteArray_FromStringAndSize(
          nullptr, static_cast<Py_ssize_t>(sel.bytes)));
      if (!ba.is_valid()) throw nb::python_error();
      std::byte* dst =
          reinterpret_cast<std::byte*>(PyByteArray_AS_STRING(ba.ptr()));
      for (const RowBlock& b : sel.blocks) {
        internal::CopyRows(fs.map->data() + b.file_offset, b.pitch, b.width,
                           RowsOf(b), dst);
        dst += RowsOf(b) * b.width;
      }
      RaiseIfError(internal::CheckUnchanged(*fs.file), ti);
      return ba;
    }
    std::shared_ptr<OwnedBytes> owned =
        ValueOrRaise(Allocate(sel.bytes, ti.name));
    Status read;
    {
      nb::gil_scoped_release nogil;
      std::byte* dst = static_cast<std::byte*>(owned->data);
      for (const RowBlock& b : sel.blocks) {
        read = CopyBlockChecked(fs, b, dst);
        if (!read.ok()) break;
        dst += RowsOf(b) * b.width;
      }
      if (read.ok()) read = internal::CheckUnchanged(*fs.file);
    }
    RaiseIfError(read, ti);
    void* data = owned->data;  // before OWNED is moved from
    return ExportBytes(data, sel.bytes, Device::Cpu(), std::move(owned),
                       /*as_memoryview=*/true);
  }

  // Runs in block B (a single run says 0 or 1).
  static uint64_t RowsOf(const RowBlock& b) {
    return std::max<uint64_t>(b.rows, 1);
  }

  // Block B of a large selection into DST: its pages populated first, so a
  // file cut short since it was checked is an IoError naming the range (the
  // populate's EFAULT), not a SIGBUS in the copy; where the kernel cannot
  // populate (before 5.14), read with pread instead.
  static Status CopyBlockChecked(const FileState& fs, const RowBlock& b,
                                 std::byte* dst) {
    const uint64_t rows = RowsOf(b);
    const int err = internal::PopulateRuns(*fs.map, 0, b.file_offset, b.pitch,
                                           b.width, rows);
    if (err == EFAULT) {
      return internal::ShrankUnderMapping(fs.file->path(), b.file_offset,
                                          b.span());
    }
    if (err != 0) {
      return rows == 1 ? fs.file->ReadAt(b.file_offset,
                                         std::span<std::byte>(dst, b.width))
                       : fs.file->ReadRows(b.file_offset, b.pitch, b.width,
                                           rows, dst);
    }
    internal::CopyRows(fs.map->data() + b.file_offset, b.pitch, b.width, rows,
                       dst);
    return Status::OK();
  }

  // Raises STATUS, naming tensor TI, unless it is OK (the name is added
  // only then: no string is built on the per-call path).
  static void RaiseIfError(const Status& status, const TensorInfo& ti) {
    if (!status.ok()) Raise(status.WithContext("tensor '" + ti.name + "'"));
  }

  // File I's state when it is already prepared, else null. Thread-safe.
  FileState* Prepared(uint32_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return files_[i].file != nullptr ? &files_[i] : nullptr;
  }

  // File I's state, opened (and for a view mapped) at its first use; null
  // when this path does not apply to it. Thread-safe.
  StatusOr<FileState*> Prepare(uint32_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    FileState& fs = files_[i];
    if (fs.file != nullptr) return &fs;
    std::shared_ptr<File> held = internal::HeldFiles::Get(*ckpt_, i);
    if (held == nullptr || held->native_fd() < 0) return nullptr;
    // The held file, checked unchanged and still at its path.
    WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                        internal::OpenForLoad(*ckpt_, i, Backend::kPread, {}));
    if (f->alignment() != 1) return nullptr;
    // view: private (writes stay in the process); copy: shared read-only.
    StatusOr<Mapping> m = f->Map(0, f->size(),
                                 view_ ? internal::MapAccess::kPrivateWritable
                                       : internal::MapAccess::kReadShared);
    if (m.status().code() == StatusCode::kUnsupported) return nullptr;
    if (!m.ok()) return m.status();
    fs.map = std::make_shared<Mapping>(std::move(*m));
    fs.file = std::move(f);
    return &fs;
  }

  std::shared_ptr<const Checkpoint> ckpt_;
  std::shared_ptr<const LoadOptions> options_;
  std::shared_ptr<const std::vector<std::string>> paths_;  // for reports
  bool view_;
  std::mutex mu_;
  std::vector<FileState> files_;
};

}  // namespace

void BindHostReads(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<HostReport>(m, "HostReport")
      .def("as_dict", [](const HostReport& r) { return ReportDict(r.Build()); })
      .def("sliced", &HostReport::Sliced, "bytes"_a, "seconds"_a);
  nb::class_<HostReads>(m, "HostReads")
      .def(
          "__init__",
          [](HostReads* self, const PyCheckpoint& ckpt, const nb::dict& options,
             bool view) {
            new (self) HostReads(ckpt.ckpt, OptionsFromDict(options), view);
          },
          "checkpoint"_a, "options"_a, "view"_a)
      .def("get", &HostReads::Get, "names"_a, "memoryview"_a = false)
      .def("get_one", &HostReads::GetOne, "name"_a, "memoryview"_a = false)
      .def("peek", &HostReads::Peek, "name"_a, "memoryview"_a = false)
      .def("slice", &HostReads::Slice, "name"_a, "index"_a.none(), "numpy"_a);
}

}  // namespace weightlift::python
