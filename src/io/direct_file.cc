// pread on an O_DIRECT descriptor: no page cache, one DMA straight into the
// caller's (aligned) buffer. Synchronous, so its depth is the number of
// threads calling it; io_uring (uring_file.cc) gets a deeper queue.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "io/backends.h"
#include "io/io_util.h"

namespace weightlift::internal {
namespace {

class DirectFile final : public File {
 public:
  DirectFile(std::string path, UniqueFd fd, uint64_t size, size_t alignment,
             std::shared_ptr<FaultInjector> faults)
      : path_(std::move(path)),
        fd_(std::move(fd)),
        size_(size),
        alignment_(alignment),
        faults_(std::move(faults)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path_, size_, alignment_, offset, dst));
    return PreadFully(fd_.get(), path_, alignment_, offset, dst, faults_.get());
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  size_t alignment() const override { return alignment_; }
  std::string_view backend_name() const override { return "direct"; }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_;
  size_t alignment_;
  std::shared_ptr<FaultInjector> faults_;
};

}  // namespace

size_t DirectIoAlignment(int fd) {
  size_t align = 4096;
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) != 0 && stx.stx_dio_offset_align > 0) {
    // Both the file offset and the buffer address must satisfy it; a power
    // of two by the kernel's contract.
    align = std::max<size_t>(stx.stx_dio_offset_align, stx.stx_dio_mem_align);
  } else if ((stx.stx_mask & STATX_DIOALIGN) != 0) {
    return 0;  // the kernel says this file cannot do direct I/O
  }
#endif
  return align;
}

StatusOr<std::unique_ptr<File>> OpenDirectFile(const std::string& path,
                                               const IoOptions& options) {
  WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(path, O_DIRECT, "direct"));
  WL_ASSIGN_OR_RETURN(uint64_t size, FdSize(fd.get(), path));
  const size_t align = DirectIoAlignment(fd.get());
  if (align == 0) {
    return Status::Unsupported("direct: '" + path +
                               "': the file system reports no O_DIRECT "
                               "support (statx STATX_DIOALIGN)");
  }
  return std::unique_ptr<File>(
      new DirectFile(path, std::move(fd), size, align, options.faults));
}

}  // namespace weightlift::internal
