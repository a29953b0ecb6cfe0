// ConfigureObjectStorage in a build without libcurl or OpenSSL
// (WL_OBJECT_STORAGE off or not found): object locations are Unsupported.
#include "weightlift/object_storage.h"

namespace weightlift {

Status ConfigureObjectStorage(const ObjectStorageOptions&) {
  return Status::Unsupported(
      "s3:// and http(s):// locations: this weightlift was built without "
      "libcurl or OpenSSL (install libcurl4-openssl-dev and libssl-dev, "
      "then rebuild)");
}

StatusOr<std::string> ReadSmallObject(const std::string&, uint64_t) {
  return ConfigureObjectStorage(ObjectStorageOptions{});
}

Status ConfigureObjectStorageFromEnvironment() {
  return ConfigureObjectStorage(ObjectStorageOptions{});
}

}  // namespace weightlift
