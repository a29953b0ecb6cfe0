// What the POSIX backends share: opening a regular file with its identity,
// fstat, the view of an open file through another backend, and mapping.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "env/backends.h"

namespace weightlift::internal {
namespace {

FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.mtime_ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.size = static_cast<uint64_t>(st.st_size);
  return id;
}

StatusOr<FileIdentity> FstatIdentity(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return Status::IoErrorFromErrno("fstat failed for '" + path + "'", errno);
  }
  return IdentityOf(st);
}

// open(2) retried on EINTR; -1 with errno on failure.
int OpenRetrying(const char* path, int flags) {
  int fd;
  do {
    fd = ::open(path, flags);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace

StatusOr<FileIdentity> StatIdentity(const std::string& path, bool* is_dir) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return Status::NotFound("'" + path + "': no such file or directory");
    }
    return Status::IoErrorFromErrno("stat failed for '" + path + "'", err);
  }
  if (is_dir != nullptr) *is_dir = S_ISDIR(st.st_mode);
  return IdentityOf(st);
}

StatusOr<PosixHandle> OpenPosixHandle(const std::string& path, bool direct,
                                      std::string_view backend) {
  WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(path, direct ? O_DIRECT : 0,
                                                std::string(backend).c_str()));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return Status::IoErrorFromErrno("fstat failed for '" + path + "'", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(std::string(backend) + ": '" + path +
                                   "' is not a regular file");
  }
  return PosixHandle{path, std::move(fd), IdentityOf(st)};
}

StatusOr<std::unique_ptr<File>> MakePosixFile(PosixHandle h, Backend backend,
                                              const IoOptions& options) {
  switch (backend) {
    case Backend::kPread:
      return MakePreadFile(std::move(h), options);
    case Backend::kDirect:
      return MakeDirectFile(std::move(h), options);
    case Backend::kUring:
      return MakeUringFile(std::move(h), options);
    case Backend::kMmap:
      return MakeMmapFile(std::move(h), options);
    case Backend::kAuto:
      break;
  }
  return Status::InvalidArgument(
      "backend " + std::string(BackendName(backend)) + " for '" + h.path +
      "': a File is read through a concrete backend (pread, direct, uring "
      "or mmap); auto is resolved per file by the loader");
}

StatusOr<FileIdentity> PosixFile::Stat() const {
  return FstatIdentity(fd(), path());
}

StatusOr<std::unique_ptr<File>> PosixFile::Reopen(
    Backend backend, const IoOptions& options) const {
  const int flags = ::fcntl(fd(), F_GETFL);
  if (flags < 0) {
    return Status::IoErrorFromErrno(
        "fcntl(F_GETFL) failed for '" + path() + "'", errno);
  }
  const bool want_direct = NeedsDirect(backend);
  PosixHandle h{path(), UniqueFd(), identity()};
  if (((flags & O_DIRECT) != 0) == want_direct) {
    // Same open flags: a second descriptor of the same open file.
    h.fd = UniqueFd(::fcntl(fd(), F_DUPFD_CLOEXEC, 0));
    if (h.fd.get() < 0) {
      return Status::IoErrorFromErrno("dup failed for '" + path() + "'", errno);
    }
    return MakePosixFile(std::move(h), backend, options);
  }
  // Other flags (O_DIRECT on or off) need a new open file. /proc/self/fd/N
  // opens the very inode we hold even if the path now names another file;
  // the identity check below guards the path fallback (no /proc).
  const std::string proc = "/proc/self/fd/" + std::to_string(fd());
  const int extra = want_direct ? O_DIRECT : 0;
  int raw = OpenRetrying(proc.c_str(), O_RDONLY | O_CLOEXEC | extra);
  if (raw < 0 && (errno == ENOENT || errno == EACCES)) {
    raw = OpenRetrying(path().c_str(), O_RDONLY | O_CLOEXEC | extra);
  }
  if (raw < 0) {
    const int err = errno;
    const std::string m = std::string(BackendName(backend)) +
                          ": cannot open '" + path() + "' again";
    if (want_direct && err == EINVAL) {
      return Status::Unsupported(m +
                                 ": the file system refuses O_DIRECT (EINVAL)");
    }
    return Status::IoErrorFromErrno(m, err);
  }
  h.fd = UniqueFd(raw);
  WL_ASSIGN_OR_RETURN(FileIdentity now, FstatIdentity(h.fd.get(), path()));
  if (now.device != identity().device || now.inode != identity().inode) {
    return Status::IoError("file '" + path() +
                           "' changed since it was opened: " +
                           DescribeIdentityChange(identity(), now));
  }
  return MakePosixFile(std::move(h), backend, options);
}

StatusOr<Mapping> PosixFile::Map(uint64_t offset, uint64_t length,
                                 MapAccess access) const {
  return Mapping::OfDescriptor(fd(), path(), offset, length,
                               access == MapAccess::kPrivateWritable);
}

}  // namespace weightlift::internal
