// pread on an O_DIRECT descriptor: no page cache, one DMA straight into the
// caller's (aligned) buffer. Synchronous, so its depth is the number of
// threads calling it; io_uring (uring_file.cc) gets a deeper queue.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "env/backends.h"

namespace weightlift::internal {
namespace {

class DirectFile final : public PosixFile {
 public:
  DirectFile(PosixHandle h, size_t alignment,
             std::shared_ptr<FaultInjector> faults)
      : PosixFile(std::move(h)),
        alignment_(alignment),
        faults_(std::move(faults)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path(), size(), alignment_, offset, dst));
    return PreadFully(fd(), path(), alignment_, offset, dst, faults_.get());
  }
  size_t alignment() const override { return alignment_; }
  std::string_view backend_name() const override {
    return BackendName(Backend::kDirect);
  }

 private:
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

StatusOr<size_t> DirectIoAlignmentOrRefuse(const PosixHandle& h,
                                           Backend backend) {
  const size_t align = DirectIoAlignment(h.fd.get());
  if (align == 0) {
    return Status::Unsupported(std::string(BackendName(backend)) + ": '" +
                               h.path +
                               "': the file system reports no O_DIRECT "
                               "support (statx STATX_DIOALIGN)");
  }
  return align;
}

StatusOr<std::unique_ptr<File>> MakeDirectFile(PosixHandle h,
                                               const IoOptions& options) {
  WL_ASSIGN_OR_RETURN(const size_t align,
                      DirectIoAlignmentOrRefuse(h, Backend::kDirect));
  return std::unique_ptr<File>(
      new DirectFile(std::move(h), align, options.faults));
}

}  // namespace weightlift::internal
