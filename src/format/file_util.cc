#include "format/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

namespace weightlift::internal {

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

ScopedFd& ScopedFd::operator=(ScopedFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

StatusOr<ScopedFd> OpenRegularFile(const std::string& path, struct stat* st) {
  int raw;
  do {
    raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoErrorFromErrno(path + ": open", errno);
  }
  ScopedFd fd(raw);
  if (::fstat(fd.get(), st) != 0) {
    return Status::IoErrorFromErrno(path + ": fstat", errno);
  }
  if (!S_ISREG(st->st_mode)) {
    return Status::InvalidArgument(path + ": not a regular file");
  }
  return fd;
}

Status PreadFully(int fd, const std::string& path, uint64_t offset,
                  std::span<std::byte> dst) {
  constexpr size_t kMaxPerCall = size_t{1} << 30;
  size_t done = 0;
  while (done < dst.size()) {
    const size_t want = std::min(dst.size() - done, kMaxPerCall);
    const ssize_t r =
        ::pread(fd, dst.data() + done, want, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::IoErrorFromErrno(
          path + ": pread of " + std::to_string(want) + " bytes at offset " +
              std::to_string(offset + done),
          errno);
    }
    if (r == 0) {
      return Status::IoError(path + ": file ended at offset " +
                             std::to_string(offset + done) + " while reading " +
                             std::to_string(dst.size()) + " bytes at offset " +
                             std::to_string(offset) +
                             " (did the file shrink after it was opened?)");
    }
    done += static_cast<size_t>(r);
  }
  return Status::OK();
}

StatusOr<std::vector<std::byte>> ReadSmallFile(const std::string& path,
                                               uint64_t max_bytes,
                                               FormatError too_large) {
  struct stat st;
  WL_ASSIGN_OR_RETURN(ScopedFd fd, OpenRegularFile(path, &st));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return Status::Corruption(too_large, path + ": " + std::to_string(size) +
                                             " bytes, more than the limit of " +
                                             std::to_string(max_bytes));
  }
  std::vector<std::byte> bytes(size);
  WL_RETURN_IF_ERROR(PreadFully(fd.get(), path, 0, bytes));
  return bytes;
}

}  // namespace weightlift::internal
