// Helpers shared by the file backends: the read loop every fd-based backend
// uses, alignment checks and error wording.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "weightlift/status.h"

namespace weightlift::internal {

class FaultInjector;

// Largest request handed to one system call (the kernel caps a read at
// 0x7ffff000 bytes; 1 GiB keeps us far below and stays block aligned).
inline constexpr uint64_t kMaxBytesPerSyscall = 1ull << 30;

inline uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
inline uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

// "file 'PATH' offset O length L".
std::string DescribeRange(const std::string& path, uint64_t offset,
                          uint64_t length);

// Checks ReadAt's contract for a file of SIZE bytes with ALIGNMENT: the range
// lies inside the file; when alignment > 1, offset, address and length are
// aligned, except a length that ends exactly at SIZE.
Status CheckReadArgs(const std::string& path, uint64_t size, size_t alignment,
                     uint64_t offset, std::span<const std::byte> dst);

// Reads DST.size() bytes at OFFSET from FD with pread, looping over EINTR and
// short reads. With ALIGNMENT > 1 every request is rounded up to a multiple of
// ALIGNMENT (DST must have that room, see File::ReadAt). FAULTS (tests only,
// may be null) stands in for ::pread.
Status PreadFully(int fd, const std::string& path, size_t alignment,
                  uint64_t offset, std::span<std::byte> dst,
                  FaultInjector* faults);

// Writes all of DATA to FD at OFFSET with pwrite, looping over EINTR and
// short writes, at most 1 GiB per call. Errors name PATH, offset, length.
Status WriteFully(int fd, const std::string& path, uint64_t offset,
                  std::span<const std::byte> data);

// The size of an open fd, or an IoError naming PATH.
StatusOr<uint64_t> FdSize(int fd, const std::string& path);

// Move-only owner of a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// open(PATH, O_RDONLY | O_CLOEXEC | EXTRA_FLAGS), retried on EINTR.
StatusOr<UniqueFd> OpenReadOnly(const std::string& path, int extra_flags,
                                const char* backend);

}  // namespace weightlift::internal
