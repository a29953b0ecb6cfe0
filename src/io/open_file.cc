// OpenFile: the factory over the concrete backends.
#include "io/backends.h"
#include "io/file.h"

namespace weightlift::internal {

std::string_view IoBackendName(IoBackend b) {
  switch (b) {
    case IoBackend::kPread:
      return "pread";
    case IoBackend::kDirect:
      return "direct";
    case IoBackend::kUring:
      return "uring";
    case IoBackend::kMmap:
      return "mmap";
  }
  return "unknown";
}

StatusOr<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         IoBackend backend,
                                         const IoOptions& options) {
  switch (backend) {
    case IoBackend::kPread:
      return OpenPreadFile(path, options);
    case IoBackend::kDirect:
      return OpenDirectFile(path, options);
    case IoBackend::kUring:
      return OpenUringFile(path, options);
    case IoBackend::kMmap:
      return OpenMmapFile(path, options);
  }
  return Status::InvalidArgument("unknown I/O backend");
}

}  // namespace weightlift::internal
