// mmap + memcpy: the file is mapped once, read-only and shared, and each
// ReadAt copies out of the mapping (page faults fill the page cache).
//
// A file that shrinks while mapped turns reads of the lost pages into
// SIGBUS. Before each copy the size is re-checked with fstat, so a file
// truncated before the read is an IoError. Known remaining race: a file
// truncated between that fstat and the end of the memcpy still raises
// SIGBUS; closing it would need a SIGBUS handler, which a library must not
// install behind its host's back. Use pread-based backends for files that
// other processes may rewrite during a load.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "io/backends.h"
#include "io/io_util.h"

namespace weightlift::internal {
namespace {

class MmapFile final : public File {
 public:
  MmapFile(std::string path, UniqueFd fd, uint64_t size, void* base)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size), base_(base) {}
  ~MmapFile() override {
    if (base_ != nullptr) ::munmap(base_, size_);
  }

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path_, size_, 1, offset, dst));
    if (dst.empty()) return Status::OK();
    WL_ASSIGN_OR_RETURN(uint64_t now, FdSize(fd_.get(), path_));
    if (now < offset + dst.size()) {
      return Status::IoError("file shrank to " + std::to_string(now) +
                             " bytes since it was opened (truncated?): " +
                             DescribeRange(path_, offset, dst.size()));
    }
    std::memcpy(dst.data(), static_cast<const std::byte*>(base_) + offset,
                dst.size());
    return Status::OK();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  std::string_view backend_name() const override { return "mmap"; }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_;
  void* base_;
};

}  // namespace

StatusOr<std::unique_ptr<File>> OpenMmapFile(const std::string& path,
                                             const IoOptions&) {
  WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(path, 0, "mmap"));
  WL_ASSIGN_OR_RETURN(uint64_t size, FdSize(fd.get(), path));
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      if (err == ENODEV) {
        return Status::Unsupported("mmap: '" + path +
                                   "': the file system cannot map files");
      }
      return Status::IoErrorFromErrno("mmap: cannot map '" + path + "' (" +
                                          std::to_string(size) + " bytes)",
                                      err);
    }
    // Copies walk the mapping in order; ask for aggressive read-ahead.
    (void)::madvise(base, size, MADV_SEQUENTIAL);
  }
  return std::unique_ptr<File>(new MmapFile(path, std::move(fd), size, base));
}

}  // namespace weightlift::internal
