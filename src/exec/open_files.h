// Opening a checkpoint's files for a load, one backend per file, and saying
// why each backend was chosen. Shared by the host and CUDA loaders.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/file.h"
#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/report.h"

namespace weightlift::internal {

struct OpenedFile {
  std::unique_ptr<File> file;     // null for files the load does not touch
  FileReport report;              // path_taken and reason filled in
  double resident_fraction = -1;  // sampled page-cache residency, -1 unknown
};

// Opens every file of CKPT for which NEEDED[i] is true with the backend that
// OPTIONS.backend names. In kAuto mode: buffered pread when at least
// options.resident_threshold of sampled pages are in the page cache, else
// O_DIRECT through io_uring, else O_DIRECT pread, else buffered pread; every
// fallback is added to NOTES. A backend named explicitly that cannot serve a
// file fails with Unsupported and the reason. Re-checks each file's size
// against the header's view (a file that changed since Open is an IoError).
StatusOr<std::vector<OpenedFile>> OpenCheckpointFiles(
    const Checkpoint& ckpt, const LoadOptions& options,
    const std::vector<bool>& needed, std::vector<std::string>* notes);

// OK when a file opened now has SIZE_NOW bytes, the size INFO's header was
// read at; else the IoError every loader path reports for a file that
// changed since Checkpoint::Open.
Status CheckUnchangedSize(const FileInfo& info, uint64_t size_now);

}  // namespace weightlift::internal
