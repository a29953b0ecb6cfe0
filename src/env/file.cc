// FileIdentity's wording and the File defaults every implementation shares.
#include "env/file.h"

namespace weightlift::internal {

std::string FileIdentity::ToString() const {
  std::string s = "dev " + std::to_string(device) + " ino " +
                  std::to_string(inode) + " mtime_ns " +
                  std::to_string(mtime_ns) + " size " + std::to_string(size);
  if (!etag.empty()) s += " etag \"" + etag + "\"";
  return s;
}

std::string DescribeIdentityChange(const FileIdentity& before,
                                   const FileIdentity& now) {
  if (before == now) return {};
  // Most telling first: another file at the path beats a new size.
  if (before.device != now.device || before.inode != now.inode) {
    return "replaced by another file (dev " + std::to_string(before.device) +
           " ino " + std::to_string(before.inode) + " -> dev " +
           std::to_string(now.device) + " ino " + std::to_string(now.inode) +
           ")";
  }
  if (before.size != now.size) {
    return "size " + std::to_string(before.size) + " -> " +
           std::to_string(now.size) + " bytes";
  }
  if (before.etag != now.etag) {
    return "etag \"" + before.etag + "\" -> \"" + now.etag + "\"";
  }
  return "modified (mtime_ns " + std::to_string(before.mtime_ns) + " -> " +
         std::to_string(now.mtime_ns) + ")";
}

Status File::ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                      uint64_t rows, std::byte* dst) {
  for (uint64_t r = 0; r < rows; ++r) {
    WL_RETURN_IF_ERROR(
        ReadAt(offset + r * pitch, std::span(dst + r * width, width)));
  }
  return Status::OK();
}

StatusOr<Mapping> File::Map(uint64_t, uint64_t, MapAccess) const {
  return Status::Unsupported("file '" + path() + "' (" +
                             std::string(backend_name()) +
                             ") cannot be mapped");
}

Status CheckUnchanged(const File& f) {
  StatusOr<FileIdentity> now = f.Stat();
  if (!now.ok()) {
    return now.status().WithContext("checking that file '" + f.path() +
                                    "' is unchanged");
  }
  const std::string change = DescribeIdentityChange(f.identity(), *now);
  if (change.empty()) return Status::OK();
  return Status::IoError("file '" + f.path() +
                         "' changed since it was opened: " + change);
}

}  // namespace weightlift::internal
