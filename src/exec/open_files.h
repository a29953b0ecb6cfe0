// Opening a checkpoint's files for a load, one backend per file, and saying
// why each backend was chosen. Shared by the host and CUDA loaders.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "env/file.h"
#include "exec/thread_pool.h"
#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/report.h"

namespace weightlift::internal {

struct OpenedFile {
  std::unique_ptr<File> file;     // null for files the load does not touch
  FileReport report;              // path_taken and reason filled in
  double resident_fraction = -1;  // sampled page-cache residency, -1 unknown
  // The load reads a small part of this file: opened buffered, residency
  // deliberately not sampled (see kSmallReadBytes).
  bool small_read = false;
};

// Opens every file of CKPT for which NEEDED[i] is true with the backend that
// OPTIONS.backend names. In kAuto mode: buffered pread when at least
// options.resident_threshold of sampled pages are in the page cache, else
// O_DIRECT through io_uring, else O_DIRECT pread, else buffered pread; every
// fallback is added to NOTES. A backend named explicitly that cannot serve a
// file fails with Unsupported and the reason. Re-checks each file's size
// against the header's view (a file that changed since Open is an IoError).
// FIXED: the loader's long-lived bounce or staging memory, which io_uring
// files register (FixedBuffers; it must outlive the files); only files of
// at least options.uring_register_min_bytes get it, as a small file's
// reads do not repay the registration. LOAD_BYTES[i], when given, is how
// many bytes the load reads from file i: in kAuto mode a file of which
// the load reads a small part (less than kSmallReadBytes and less than
// half the file) is read buffered without sampling its residency: the
// file's residency says little about those few pages, and the mapping and
// mincore cost more than such a read gains from O_DIRECT (a get_slice of
// a few rows paid ~0.4 ms per call for it). POOL, when given (idle: the
// loader's workers before its run) and its workers have started, opens
// the files side by side; NOTES and the error returned (the first file's
// in file order) are the same as without it.
inline constexpr uint64_t kSmallReadBytes = 32u << 20;
StatusOr<std::vector<OpenedFile>> OpenCheckpointFiles(
    const Checkpoint& ckpt, const LoadOptions& options,
    const std::vector<bool>& needed, std::vector<std::string>* notes,
    const FixedBuffers& fixed = {}, std::span<const uint64_t> load_bytes = {},
    ThreadPool* pool = nullptr);

// Tests only: sees every File a loader opens (with the index of its
// checkpoint file) and returns the File to use instead, e.g. a
// FaultInjectingFile that fails mid-load. Given to CreateHostLoader or in
// CudaLoaderHooks.
using FileWrapper =
    std::function<std::unique_ptr<File>(std::unique_ptr<File>, uint32_t)>;

// Passes every opened file of OPENED through WRAP (nothing when it is
// empty).
void WrapOpenedFiles(const FileWrapper& wrap, std::vector<OpenedFile>* opened);

// MEMORY, with the loader's shared refusal flag REFUSED, when a load that
// may pass BOUNCE_BYTES through it should register it with its io_uring
// rings (OPTIONS.uring_register_min_bytes); no regions otherwise.
FixedBuffers MemoryToRegister(std::span<std::byte> memory,
                              uint64_t bounce_bytes, const LoadOptions& options,
                              std::shared_ptr<std::atomic<int>> refused);

// Adds to REPORT what the opened files did beyond their names: for each
// file that served some reads in a fallback way (File::Degraded), a note
// with its path and what happened; the row runs each copied from a mapping
// (its FileReport, REPORT->files[REPORT_INDEX[i]] for OPENED[i]); the
// io_uring reads into registered buffers (REPORT->counts). Called by every
// loader once its reads are done, failed or not.
void AddFileOutcomes(const std::vector<OpenedFile>& opened,
                     std::span<const int> report_index, LoadReport* report);

// OK when every file of OPENED is unchanged since Checkpoint::Open and its
// path still names it (CheckUnchangedAt); else the IoError naming the file,
// what changed, and the first of TENSORS (indices into ckpt.tensors()) read
// from it with its offset: those bytes may mix two versions of the file.
// Every loader calls it after its last read, before reporting success.
Status CheckFilesUnchanged(const Checkpoint& ckpt,
                           const std::vector<uint32_t>& tensors,
                           const std::vector<OpenedFile>& opened);

// OK when a file opened now has SIZE_NOW bytes, the size INFO's header was
// read at; else the IoError every loader path reports for a file that
// changed since Checkpoint::Open.
Status CheckUnchangedSize(const FileInfo& info, uint64_t size_now);

}  // namespace weightlift::internal
