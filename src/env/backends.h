// The POSIX Files, one source file per backend, over one open descriptor.
// Made by the POSIX Env (posix_env.cc) and by File::Reopen; nothing else
// constructs them.
#pragma once

#include <memory>
#include <string>

#include "env/file.h"
#include "env/io_util.h"

namespace weightlift::internal {

// An open regular file: the descriptor, where it was opened, and its
// identity at that moment.
struct PosixHandle {
  std::string path;
  UniqueFd fd;
  FileIdentity identity;
};

// What every POSIX backend shares: identity, Stat (fstat), Reopen (dup or
// /proc/self/fd), Map and the descriptor. Backends add ReadAt.
class PosixFile : public File {
 public:
  explicit PosixFile(PosixHandle handle) : handle_(std::move(handle)) {}

  StatusOr<FileIdentity> Stat() const override;
  StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const override;
  StatusOr<Mapping> Map(uint64_t offset, uint64_t length,
                        MapAccess access) const override;
  const std::string& path() const override { return handle_.path; }
  const FileIdentity& identity() const override { return handle_.identity; }
  int native_fd() const override { return handle_.fd.get(); }

 protected:
  int fd() const { return handle_.fd.get(); }

 private:
  PosixHandle handle_;
};

// Opens PATH read-only (O_DIRECT when DIRECT), following symlinks, and
// records its identity. NotFound / InvalidArgument (not a regular file) /
// Unsupported (O_DIRECT refused) / IoError, each naming BACKEND and PATH.
StatusOr<PosixHandle> OpenPosixHandle(const std::string& path, bool direct,
                                      std::string_view backend);

// The identity of PATH now (stat, following symlinks); *IS_DIR (may be
// null) says whether it is a directory. NotFound when absent.
StatusOr<FileIdentity> StatIdentity(const std::string& path, bool* is_dir);

// H read through BACKEND. H's descriptor must have O_DIRECT exactly when
// BACKEND is kDirect or kUring (see NeedsDirect).
StatusOr<std::unique_ptr<File>> MakePosixFile(PosixHandle h, Backend backend,
                                              const IoOptions& options);
inline bool NeedsDirect(Backend b) {
  return b == Backend::kDirect || b == Backend::kUring;
}

// The backends (one source file each).
// Buffered pread (page cache).
std::unique_ptr<File> MakePreadFile(PosixHandle h, const IoOptions& options);
// pread on an O_DIRECT descriptor; alignment() is the file's direct I/O
// alignment (statx STATX_DIOALIGN where the kernel reports it, else 4096).
StatusOr<std::unique_ptr<File>> MakeDirectFile(PosixHandle h,
                                               const IoOptions& options);
// io_uring on an O_DIRECT descriptor. Unsupported when liburing is not
// compiled in or the kernel refuses io_uring_queue_init (errno named).
StatusOr<std::unique_ptr<File>> MakeUringFile(PosixHandle h,
                                              const IoOptions& options);
// Read-only shared mapping of the whole file + memcpy.
StatusOr<std::unique_ptr<File>> MakeMmapFile(PosixHandle h,
                                             const IoOptions& options);

// The direct I/O alignment of FD (see MakeDirectFile); 0 when the kernel
// reports the file cannot do direct I/O at all.
size_t DirectIoAlignment(int fd);
// What the O_DIRECT backends (kDirect, kUring) ask before they make a File:
// DirectIoAlignment of H's descriptor, or Unsupported naming BACKEND and
// H's path when the kernel says the file cannot do direct I/O (auto mode
// then falls back to a buffered backend).
StatusOr<size_t> DirectIoAlignmentOrRefuse(const PosixHandle& h,
                                           Backend backend);

}  // namespace weightlift::internal
