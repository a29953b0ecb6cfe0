#include "exec/open_files.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <optional>

#include "env/cold_file.h"
#include "env/env.h"
#include "env/mapped_rows_file.h"
#include "env/page_cache.h"
#include "env/warm_mappings.h"
#include "format/held_files.h"
#include "util/errno_text.h"
#include "util/percent.h"

namespace weightlift::internal {
namespace {

// What prepare's filling of this file's row pages got done
// (warm_mappings.h).
std::string WarmNote(const WarmMapping& w) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                " whose pages prepare filled: %llu of %llu runs in %.1f ms",
                static_cast<unsigned long long>(w.runs_filled),
                static_cast<unsigned long long>(w.runs_total),
                w.fill_seconds * 1e3);
  std::string s = buf;
  if (w.error != 0) s += " (stopped: " + ErrnoName(w.error) + ")";
  return s;
}

// Opens file I of CKPT in auto mode: residency decides buffered vs direct.
StatusOr<OpenedFile> OpenAuto(const Checkpoint& ckpt, uint32_t i,
                              const LoadOptions& options, const IoOptions& io,
                              std::optional<uint64_t> read_bytes,
                              std::vector<std::string>* notes) {
  const std::string& name = ckpt.files()[i].path;
  OpenedFile out;
  // The buffered view is a second descriptor of the held file: cheap, and
  // what a resident file is read through.
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> buffered,
                      OpenForLoad(ckpt, i, Backend::kPread, io));
  if (buffered->native_fd() < 0 &&
      buffered->backend_name() != BackendName(Backend::kPread)) {
    // Not a local file (object storage): it serves every backend with its
    // own reads, and has no page cache to sample.
    out.file = std::move(buffered);
    out.report.path_taken = std::string(out.file->backend_name());
    out.report.reason = "remote object: ranged reads of its own";
    return out;
  }
  if (read_bytes && *read_bytes < kSmallReadBytes &&
      *read_bytes < ckpt.files()[i].size / 2) {
    out.file = std::move(buffered);
    out.small_read = true;
    out.report.path_taken = BackendName(Backend::kPread);
    out.report.reason = "small read (" + std::to_string(*read_bytes) + " of " +
                        std::to_string(ckpt.files()[i].size) +
                        " bytes): buffered pread, residency not sampled";
    return out;
  }
  auto residency = SampleResidency(*buffered);
  std::string why;
  if (residency.ok()) {
    out.resident_fraction = residency->fraction;
    why = "pages " + Percent(residency->fraction) + " resident (" +
          std::to_string(residency->windows) + " samples)";
    if (residency->fraction >= options.resident_threshold) {
      // Resident: a slice's short row runs are copied out of a populated
      // mapping rather than read one pread each (mapped_rows_file.h).
      std::optional<WarmMapping> warm = HeldFiles::Warm(ckpt).Take(i);
      out.file = WithRowsFromMapping(std::move(buffered),
                                     warm ? std::move(warm->map) : Mapping{});
      out.report.path_taken = BackendName(Backend::kPread);
      out.report.reason = why +
                          ": buffered pread (short row runs: copies from a "
                          "mapping" +
                          (warm ? WarmNote(*warm) : std::string()) + ")";
      return out;
    }
  } else {
    why = "residency unknown (" + residency.status().message() + ")";
  }
  auto uring = OpenForLoad(ckpt, i, Backend::kUring, io);
  if (uring.ok()) {
    out.file = std::move(*uring);
    out.report.path_taken = BackendName(Backend::kUring);
    out.report.reason =
        why + ": O_DIRECT io_uring QD" + std::to_string(options.queue_depth);
    return out;
  }
  const std::string uring_why = uring.status().message();
  auto direct = OpenForLoad(ckpt, i, Backend::kDirect, io);
  if (direct.ok()) {
    out.file = std::move(*direct);
    out.report.path_taken = BackendName(Backend::kDirect);
    out.report.reason = why + ": O_DIRECT pread (io_uring unavailable)";
    if (notes)
      notes->push_back(name + ": io_uring unavailable (" + uring_why +
                       "); used O_DIRECT pread");
    return out;
  }
  if (direct.status().code() != StatusCode::kUnsupported) {
    return direct.status();
  }
  // Not resident (or unknown): every pread may be a request to storage.
  out.file = WithColdReads(std::move(buffered));
  out.report.path_taken = BackendName(Backend::kPread);
  out.report.reason = why +
                      ": buffered pread (O_DIRECT unavailable), each read "
                      "weighed as a storage request";
  if (notes)
    notes->push_back(name + ": O_DIRECT unavailable (" +
                     direct.status().message() + "); used buffered pread");
  return out;
}

// A requested buffered (pread) file whose pages are mostly not resident:
// its reads are requests to storage, and the planner should weigh them so
// (cold_file.h). Resident files, files on tmpfs, and files that cannot be
// sampled (object storage) keep their own cost.
void WeighColdBufferedReads(const LoadOptions& options, OpenedFile* f) {
  if (f->file->native_fd() < 0 || OnMemoryFileSystem(*f->file)) return;
  auto residency = SampleResidency(*f->file);
  if (!residency.ok()) return;
  f->resident_fraction = residency->fraction;
  if (residency->fraction >= options.resident_threshold) return;
  f->file = WithColdReads(std::move(f->file));
  f->report.reason += "; pages " + Percent(residency->fraction) +
                      " resident: each read weighed as a storage request";
}

// Opens file I of CKPT for a load as OPTIONS say into *OUT (its report's
// path already set), adding the notes of its fallbacks to NOTES.
Status OpenOne(const Checkpoint& ckpt, uint32_t i, const LoadOptions& options,
               IoOptions io, const FixedBuffers& fixed,
               std::optional<uint64_t> read_bytes, OpenedFile* out,
               std::vector<std::string>* notes) {
  const FileInfo& info = ckpt.files()[i];
  io.fixed_buffers =
      info.size >= options.uring_register_min_bytes ? fixed : FixedBuffers{};
  if (options.backend == Backend::kAuto) {
    WL_ASSIGN_OR_RETURN(OpenedFile f,
                        OpenAuto(ckpt, i, options, io, read_bytes, notes));
    f.report.path = info.path;
    *out = std::move(f);
    return Status::OK();
  }
  auto f = OpenForLoad(ckpt, i, options.backend, io);
  if (!f.ok()) {
    return f.status().WithContext(
        "backend " + std::string(BackendName(options.backend)) + " requested");
  }
  out->file = std::move(*f);
  out->report.path_taken = std::string(out->file->backend_name());
  out->report.reason =
      "requested (backend=" + std::string(BackendName(options.backend)) + ")";
  if (options.backend == Backend::kPread) WeighColdBufferedReads(options, out);
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<OpenedFile>> OpenCheckpointFiles(
    const Checkpoint& ckpt, const LoadOptions& options,
    const std::vector<bool>& needed, std::vector<std::string>* notes,
    const FixedBuffers& fixed, std::span<const uint64_t> load_bytes,
    ThreadPool* pool) {
  // Row pages prepare filled are for this load only: what it did not take
  // (another backend, a file no longer resident) goes when it has opened.
  struct ReleaseWarm {
    const Checkpoint& ckpt;
    ~ReleaseWarm() { HeldFiles::Warm(ckpt).Release(); }
  } release_warm{ckpt};
  IoOptions io;
  io.queue_depth = options.queue_depth;
  const size_t n = ckpt.files().size();
  std::vector<OpenedFile> out(n);
  std::vector<uint32_t> to_open;
  for (size_t i = 0; i < n; ++i) {
    out[i].report.path = ckpt.files()[i].path;
    if (i >= needed.size() || !needed[i]) {
      out[i].report.path_taken = "none";
      out[i].report.reason = "no requested tensor in this file";
      continue;
    }
    to_open.push_back(static_cast<uint32_t>(i));
  }
  // Each file's own status and notes, gathered in file order whichever
  // thread opened it.
  std::vector<Status> status(to_open.size());
  std::vector<std::vector<std::string>> file_notes(to_open.size());
  auto open = [&](size_t k) {
    const uint32_t i = to_open[k];
    std::optional<uint64_t> read_bytes;
    if (i < load_bytes.size()) read_bytes = load_bytes[i];
    status[k] = OpenOne(ckpt, i, options, io, fixed, read_bytes, &out[i],
                        &file_notes[k]);
  };
  // Opening a resident file samples its residency (0.1-0.4 ms on the
  // development VM), so a checkpoint of many files opens them on the
  // loader's idle workers, a file at a time each; but not while the
  // workers still run their start (a new CUDA loader's pin its staging
  // ring then, for milliseconds): the files are opened here beside that,
  // as before.
  std::atomic<size_t> next{0};
  const bool spread =
      pool != nullptr && to_open.size() > 1 && pool->started() &&
      pool->Run(
              [&](int) {
                for (size_t k; (k = next.fetch_add(1)) < to_open.size();) {
                  open(k);
                }
              },
              static_cast<int>(to_open.size()))
          .ok();
  if (!spread) {
    // No pool, one file, or a forked child's pool that runs nothing: the
    // files not yet opened are opened here, in order, up to the first that
    // fails (whose error is the one returned either way).
    for (size_t k; (k = next.fetch_add(1)) < to_open.size();) {
      open(k);
      if (!status[k].ok()) break;
    }
  }
  if (notes != nullptr) {
    for (const std::vector<std::string>& fn : file_notes) {
      notes->insert(notes->end(), fn.begin(), fn.end());
    }
  }
  for (const Status& st : status) WL_RETURN_IF_ERROR(st);
  return out;
}

Status CheckFilesUnchanged(const Checkpoint& ckpt,
                           const std::vector<uint32_t>& tensors,
                           const std::vector<OpenedFile>& opened) {
  for (size_t i = 0; i < opened.size(); ++i) {
    const File* f = opened[i].file.get();
    if (f == nullptr) continue;
    WL_ASSIGN_OR_RETURN(Env * env, EnvForLocation(f->path()));
    Status s = CheckUnchangedAt(*env, *f);
    if (s.ok()) continue;
    for (uint32_t idx : tensors) {
      const TensorInfo& ti = ckpt.tensors()[idx];
      if (ti.file != i) continue;
      return Status::IoError(s.message() + " during the load; tensor '" +
                             ti.name + "' at offset " +
                             std::to_string(ti.offset) +
                             " and the others read from it are not loaded");
    }
    return s;
  }
  return Status::OK();
}

Status CheckUnchangedSize(const FileInfo& info, uint64_t size_now) {
  if (size_now == info.size) return Status::OK();
  return Status::IoError("file '" + info.path + "' is now " +
                         std::to_string(size_now) + " bytes but had " +
                         std::to_string(info.size) +
                         " when its header was read (changed since "
                         "Checkpoint::Open)");
}

void WrapOpenedFiles(const FileWrapper& wrap, std::vector<OpenedFile>* opened) {
  if (!wrap) return;
  for (size_t i = 0; i < opened->size(); ++i) {
    std::unique_ptr<File>& f = (*opened)[i].file;
    if (f) f = wrap(std::move(f), static_cast<uint32_t>(i));
  }
}

FixedBuffers MemoryToRegister(std::span<std::byte> memory,
                              uint64_t bounce_bytes, const LoadOptions& options,
                              std::shared_ptr<std::atomic<int>> refused) {
  FixedBuffers out;
  out.refused = std::move(refused);
  if (!memory.empty() && bounce_bytes >= options.uring_register_min_bytes) {
    out.regions = {memory};
  }
  return out;
}

void AddFileOutcomes(const std::vector<OpenedFile>& opened,
                     std::span<const int> report_index, LoadReport* report) {
  for (size_t i = 0; i < opened.size(); ++i) {
    const File* f = opened[i].file.get();
    if (f == nullptr) continue;
    if (std::string d = f->Degraded(); !d.empty()) {
      report->notes.push_back(opened[i].report.path + ": " + d);
    }
    report->counts.registered_buffer_reads += f->registered_buffer_reads();
    const File::CopiedRows rows = f->copied_rows();
    const int k = i < report_index.size() ? report_index[i] : -1;
    if (rows.runs > 0 && k >= 0 &&
        static_cast<size_t>(k) < report->files.size()) {
      report->files[static_cast<size_t>(k)].copied_row_runs += rows.runs;
      report->files[static_cast<size_t>(k)].copied_row_reads += rows.reads;
    }
  }
}

}  // namespace weightlift::internal
