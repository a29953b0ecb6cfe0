#include "io/memory_file.h"

#include <algorithm>
#include <cstring>

#include "io/io_util.h"

namespace weightlift::internal {

MemoryFile::MemoryFile(std::string path, std::vector<std::byte> bytes,
                       size_t alignment)
    : path_(std::move(path)),
      bytes_(std::move(bytes)),
      size_(bytes_.size()),
      alignment_(std::max<size_t>(alignment, 1)),
      visible_(bytes_.size()) {}

Status MemoryFile::ReadAt(uint64_t offset, std::span<std::byte> dst) {
  WL_RETURN_IF_ERROR(CheckReadArgs(path_, size_, alignment_, offset, dst));
  const uint64_t visible = visible_.load();
  if (offset + dst.size() > visible) {
    return Status::IoError("file ended early (truncated?): " +
                           DescribeRange(path_, offset, dst.size()) +
                           ", file now has " + std::to_string(visible) +
                           " bytes");
  }
  if (!dst.empty()) std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
  return Status::OK();
}

}  // namespace weightlift::internal
