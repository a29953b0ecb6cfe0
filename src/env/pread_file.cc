// Buffered pread: one copy out of the page cache per byte. The right backend
// when the file is already resident, and the portable fallback.
#include <fcntl.h>

#include "env/backends.h"

namespace weightlift::internal {
namespace {

class PreadFile final : public PosixFile {
 public:
  PreadFile(PosixHandle h, std::shared_ptr<FaultInjector> faults)
      : PosixFile(std::move(h)), faults_(std::move(faults)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path(), size(), 1, offset, dst));
    return PreadFully(fd(), path(), 1, offset, dst, faults_.get());
  }
  std::string_view backend_name() const override {
    return BackendName(Backend::kPread);
  }

 private:
  std::shared_ptr<FaultInjector> faults_;
};

}  // namespace

std::unique_ptr<File> MakePreadFile(PosixHandle h, const IoOptions& options) {
  // Chunks are read in order by each thread: a larger read-ahead window
  // helps when the file is not resident. Advisory; failure is harmless.
  (void)::posix_fadvise(h.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::make_unique<PreadFile>(std::move(h), options.faults);
}

}  // namespace weightlift::internal
