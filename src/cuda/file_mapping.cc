#include "cuda/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "io/io_util.h"

namespace weightlift::internal {

StatusOr<FileMapping> FileMapping::Map(const std::string& path,
                                       uint64_t expect_size) {
  FileMapping m;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    int e = errno;
    return Status::IoErrorFromErrno(path + ": open for host-register", e);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    int e = errno;
    return Status::IoErrorFromErrno(path + ": fstat", e);
  }
  if (static_cast<uint64_t>(st.st_size) != expect_size) {
    return Status::IoError(path +
                           ": file size changed since the header was "
                           "read: now " +
                           std::to_string(st.st_size) + " bytes, expected " +
                           std::to_string(expect_size));
  }
  if (expect_size > 0) {
    void* p = mmap(nullptr, expect_size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) {
      int e = errno;
      return Status::IoErrorFromErrno(
          path + ": mmap of " + std::to_string(expect_size) + " bytes", e);
    }
    m.data_ = static_cast<std::byte*>(p);
    m.size_ = expect_size;
  }
  return m;  // the mapping outlives FD
}

FileMapping& FileMapping::operator=(FileMapping&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void FileMapping::Reset() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace weightlift::internal
