// The few POSIX file helpers src/format needs to read headers and indexes.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weightlift/status.h"

namespace weightlift::internal {

// Move-only owner of a file descriptor.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(ScopedFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ScopedFd& operator=(ScopedFd&& o) noexcept;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  // Gives up ownership (the caller closes it).
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Opens PATH read-only (following symlinks) and fstat()s it into *ST.
// NotFound when it does not exist; InvalidArgument when it is not a regular
// file; IoError (with errno) otherwise.
StatusOr<ScopedFd> OpenRegularFile(const std::string& path, struct stat* st);

// Reads exactly DST.size() bytes at OFFSET. Loops over short reads and EINTR,
// at most 1 GiB per call; hitting EOF early is an IoError naming PATH, the
// offset and the length.
Status PreadFully(int fd, const std::string& path, uint64_t offset,
                  std::span<std::byte> dst);

// Reads all of PATH if it is at most MAX_BYTES long. TOO_LARGE is returned
// (with the size in its message) when it is longer.
StatusOr<std::vector<std::byte>> ReadSmallFile(const std::string& path,
                                               uint64_t max_bytes,
                                               FormatError too_large);

}  // namespace weightlift::internal
