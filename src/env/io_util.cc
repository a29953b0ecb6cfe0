#include "env/io_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "env/fault_file.h"

namespace weightlift::internal {

std::string DescribeRange(const std::string& path, uint64_t offset,
                          uint64_t length) {
  return "file '" + path + "' offset " + std::to_string(offset) + " length " +
         std::to_string(length);
}

Status CheckReadArgs(const std::string& path, uint64_t size, size_t alignment,
                     uint64_t offset, std::span<const std::byte> dst) {
  const uint64_t len = dst.size();
  if (offset > size || len > size - offset) {
    return Status::InvalidArgument(
        "read past the end: " + DescribeRange(path, offset, len) +
        " but the file has " + std::to_string(size) + " bytes");
  }
  if (alignment > 1) {
    const bool len_ok = len % alignment == 0 || offset + len == size;
    if (offset % alignment != 0 || !len_ok ||
        reinterpret_cast<uintptr_t>(dst.data()) % alignment != 0) {
      return Status::InvalidArgument("unaligned direct read (alignment " +
                                     std::to_string(alignment) +
                                     "): " + DescribeRange(path, offset, len));
    }
  }
  return Status::OK();
}

Status PreadFully(int fd, const std::string& path, size_t alignment,
                  uint64_t offset, std::span<std::byte> dst,
                  FaultInjector* faults) {
  const uint64_t need = dst.size();
  const uint64_t request = alignment > 1 ? AlignUp(need, alignment) : need;
  uint64_t done = 0;
  while (done < need) {
    const uint64_t ask = std::min(request - done, kMaxBytesPerSyscall);
    void* at = dst.data() + done;
    const off_t where = static_cast<off_t>(offset + done);
    ssize_t r = faults != nullptr ? faults->Pread(fd, at, ask, where)
                                  : ::pread(fd, at, ask, where);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return Status::IoErrorFromErrno("pread failed at offset " +
                                          std::to_string(offset + done) + ": " +
                                          DescribeRange(path, offset, need),
                                      err);
    }
    if (r == 0) {
      return Status::IoError("file ended early (truncated?): " +
                             DescribeRange(path, offset, need) + ", got " +
                             std::to_string(done) + " bytes");
    }
    done += static_cast<uint64_t>(r);
    if (alignment > 1 && done % alignment != 0 && done < need) {
      // O_DIRECT reads come back short and unaligned only at end of file.
      return Status::IoError("file ended early (truncated?): " +
                             DescribeRange(path, offset, need) + ", got " +
                             std::to_string(done) + " bytes");
    }
  }
  return Status::OK();
}

Status WriteFully(int fd, const std::string& path, uint64_t offset,
                  std::span<const std::byte> data) {
  uint64_t done = 0;
  while (done < data.size()) {
    const uint64_t want =
        std::min<uint64_t>(data.size() - done, kMaxBytesPerSyscall);
    const ssize_t w = ::pwrite(fd, data.data() + done, want,
                               static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      return Status::IoErrorFromErrno(
          "write failed at offset " + std::to_string(offset + done) + ": " +
              DescribeRange(path, offset, data.size()),
          err);
    }
    done += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

StatusOr<uint64_t> FdSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return Status::IoErrorFromErrno("fstat failed for '" + path + "'", errno);
  }
  return static_cast<uint64_t>(st.st_size);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<UniqueFd> OpenReadOnly(const std::string& path, int extra_flags,
                                const char* backend) {
  int fd;
  // O_NONBLOCK: opening a FIFO (or a device) named like a checkpoint file
  // would otherwise block until a writer comes, before the caller's
  // regular-file check could refuse it. Cleared again below: it means
  // nothing to reads of a regular file, but the descriptor stays plain.
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    std::string m = std::string(backend) + ": cannot open '" + path + "'";
    if (err == ENOENT) return Status::NotFound(m + ": no such file");
    if ((extra_flags & O_DIRECT) != 0 && err == EINVAL) {
      return Status::Unsupported(m +
                                 ": the file system refuses O_DIRECT (EINVAL)");
    }
    return Status::IoErrorFromErrno(m, err);
  }
  UniqueFd owned(fd);
  if ((extra_flags & O_NONBLOCK) == 0) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return Status::IoErrorFromErrno(
          std::string(backend) + ": cannot clear O_NONBLOCK on '" + path + "'",
          errno);
    }
  }
  return owned;
}

}  // namespace weightlift::internal
