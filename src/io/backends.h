// Constructors of the concrete File backends, one source file each. Most
// callers use OpenFile (file.h); tests and raw_read use these directly.
#pragma once

#include <memory>
#include <string>

#include "io/file.h"

namespace weightlift::internal {

// Buffered pread (page cache).
StatusOr<std::unique_ptr<File>> OpenPreadFile(const std::string& path,
                                              const IoOptions& options);
// pread on an O_DIRECT descriptor; alignment() is the file's direct I/O
// alignment (statx STATX_DIOALIGN where the kernel reports it, else 4096).
StatusOr<std::unique_ptr<File>> OpenDirectFile(const std::string& path,
                                               const IoOptions& options);
// io_uring on an O_DIRECT descriptor. Unsupported when liburing is not
// compiled in or the kernel refuses io_uring_queue_init (errno named).
StatusOr<std::unique_ptr<File>> OpenUringFile(const std::string& path,
                                              const IoOptions& options);
// Read-only shared mapping of the whole file + memcpy.
StatusOr<std::unique_ptr<File>> OpenMmapFile(const std::string& path,
                                             const IoOptions& options);

// The direct I/O alignment of FD (see OpenDirectFile); 0 when the kernel
// reports the file cannot do direct I/O at all.
size_t DirectIoAlignment(int fd);

}  // namespace weightlift::internal
