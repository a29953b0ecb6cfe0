// Buffered pread: one copy out of the page cache per byte. The right backend
// when the file is already resident, and the portable fallback.
#include <fcntl.h>

#include "io/backends.h"
#include "io/io_util.h"

namespace weightlift::internal {
namespace {

class PreadFile final : public File {
 public:
  PreadFile(std::string path, UniqueFd fd, uint64_t size,
            std::shared_ptr<FaultInjector> faults)
      : path_(std::move(path)),
        fd_(std::move(fd)),
        size_(size),
        faults_(std::move(faults)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path_, size_, 1, offset, dst));
    return PreadFully(fd_.get(), path_, 1, offset, dst, faults_.get());
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  std::string_view backend_name() const override { return "pread"; }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_;
  std::shared_ptr<FaultInjector> faults_;
};

}  // namespace

StatusOr<std::unique_ptr<File>> OpenPreadFile(const std::string& path,
                                              const IoOptions& options) {
  WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(path, 0, "pread"));
  WL_ASSIGN_OR_RETURN(uint64_t size, FdSize(fd.get(), path));
  // Chunks are read in order by each thread: a larger read-ahead window
  // helps when the file is not resident. Advisory; failure is harmless.
  (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<File>(
      new PreadFile(path, std::move(fd), size, options.faults));
}

}  // namespace weightlift::internal
