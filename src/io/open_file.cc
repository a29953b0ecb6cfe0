// OpenFile: the factory over the concrete backends.
#include "io/backends.h"
#include "io/file.h"

namespace weightlift::internal {

StatusOr<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         Backend backend,
                                         const IoOptions& options) {
  switch (backend) {
    case Backend::kPread:
      return OpenPreadFile(path, options);
    case Backend::kDirect:
      return OpenDirectFile(path, options);
    case Backend::kUring:
      return OpenUringFile(path, options);
    case Backend::kMmap:
      return OpenMmapFile(path, options);
    case Backend::kAuto:
      break;
  }
  return Status::InvalidArgument(
      path + ": backend " + std::string(BackendName(backend)) +
      " names no one backend (auto is resolved per file before opening)");
}

}  // namespace weightlift::internal
