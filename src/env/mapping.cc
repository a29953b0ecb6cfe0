#include "env/mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>
#include <utility>

#include "util/errno_text.h"

namespace weightlift::internal {
namespace {

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

Mapping::Mapping(Mapping&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      length_(std::exchange(o.length_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    Reset();
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void Mapping::Reset() {
  if (base_ != nullptr) ::munmap(base_, length_);
  base_ = nullptr;
  length_ = 0;
  data_ = nullptr;
  size_ = 0;
}

void Mapping::ResetInBackground() {
  if (base_ == nullptr) return;
  try {
    std::thread([base = base_, length = length_] {
      ::munmap(base, length);
    }).detach();
  } catch (const std::system_error&) {
    Reset();
    return;
  }
  base_ = nullptr;  // that thread unmaps it
  Reset();
}

StatusOr<Mapping> Mapping::Anonymous(uint64_t bytes, std::string_view what,
                                     bool huge) {
  const uint64_t page = PageSize();
  if (bytes > UINT64_MAX - page) {
    return Status::ResourceExhausted("cannot allocate " +
                                     std::to_string(bytes) + " bytes of " +
                                     std::string(what));
  }
  const uint64_t length =
      std::max<uint64_t>((bytes + page - 1) / page, 1) * page;
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return Status::ResourceExhausted(
        "cannot allocate " + std::to_string(length) + " bytes of " +
        std::string(what) + ": mmap: " + ErrnoText(err));
  }
  if (huge && length >= (uint64_t{2} << 20)) {
    (void)::madvise(p, length, MADV_HUGEPAGE);  // advisory: may be refused
  }
  Mapping m;
  m.base_ = p;
  m.length_ = length;
  m.data_ = static_cast<std::byte*>(p);
  m.size_ = length;
  return m;
}

StatusOr<Mapping> Mapping::OfDescriptor(int fd, const std::string& path,
                                        uint64_t offset, uint64_t length,
                                        bool writable_private) {
  Mapping m;
  if (length == 0) return m;
  const uint64_t page = PageSize();
  const uint64_t start = offset / page * page;
  const uint64_t lead = offset - start;
  if (length > UINT64_MAX - lead) {
    return Status::InvalidArgument("cannot map " + std::to_string(length) +
                                   " bytes of '" + path + "' at offset " +
                                   std::to_string(offset));
  }
  const int prot = writable_private ? PROT_READ | PROT_WRITE : PROT_READ;
  const int flags = writable_private ? MAP_PRIVATE : MAP_SHARED;
  void* p = ::mmap(nullptr, lead + length, prot, flags, fd,
                   static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    const int err = errno;
    const std::string what = "cannot map file '" + path + "' offset " +
                             std::to_string(offset) + " length " +
                             std::to_string(length);
    if (err == ENODEV) {
      return Status::Unsupported(what +
                                 ": the file system cannot map files (ENODEV)");
    }
    if (err == ENOMEM) {
      return Status::ResourceExhausted(what + ": mmap: " + ErrnoText(err));
    }
    return Status::IoErrorFromErrno(what, err);
  }
  m.base_ = p;
  m.length_ = lead + length;
  m.data_ = static_cast<std::byte*>(p) + lead;
  m.size_ = length;
  return m;
}

int Mapping::PopulateRead(uint64_t offset, uint64_t length) const {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;  // linux/mman.h, Linux 5.14
#endif
  if (length == 0) return 0;
  const uint64_t page = PageSize();
  const uintptr_t first =
      reinterpret_cast<uintptr_t>(data_ + offset) / page * page;
  const uint64_t end = reinterpret_cast<uintptr_t>(data_ + offset) + length;
  int rc;
  do {
    rc = ::madvise(reinterpret_cast<void*>(first), end - first,
                   MADV_POPULATE_READ);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

void Mapping::AdviseSequential() const {
  if (base_ != nullptr) (void)::madvise(base_, length_, MADV_SEQUENTIAL);
}

void Mapping::AdviseWillNeed() const {
  if (base_ != nullptr) (void)::madvise(base_, length_, MADV_WILLNEED);
}

}  // namespace weightlift::internal
