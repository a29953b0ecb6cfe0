#include "env/memory_file.h"

#include <algorithm>
#include <cstring>

#include "env/io_util.h"

namespace weightlift::internal {

MemoryFile::MemoryFile(std::string path, std::vector<std::byte> bytes,
                       size_t alignment)
    : MemoryFile(
          std::move(path),
          std::make_shared<const std::vector<std::byte>>(std::move(bytes)),
          alignment, nullptr) {}

MemoryFile::MemoryFile(std::string path,
                       std::shared_ptr<const std::vector<std::byte>> bytes,
                       size_t alignment,
                       std::shared_ptr<std::atomic<uint64_t>> visible)
    : path_(std::move(path)),
      bytes_(std::move(bytes)),
      alignment_(std::max<size_t>(alignment, 1)),
      visible_(visible
                   ? std::move(visible)
                   : std::make_shared<std::atomic<uint64_t>>(bytes_->size())) {
  identity_.size = bytes_->size();
}

Status MemoryFile::ReadAt(uint64_t offset, std::span<std::byte> dst) {
  WL_RETURN_IF_ERROR(CheckReadArgs(path_, size(), alignment_, offset, dst));
  const uint64_t visible = visible_->load();
  if (offset + dst.size() > visible) {
    return Status::IoError("file ended early (truncated?): " +
                           DescribeRange(path_, offset, dst.size()) +
                           ", file now has " + std::to_string(visible) +
                           " bytes");
  }
  if (!dst.empty()) {
    std::memcpy(dst.data(), bytes_->data() + offset, dst.size());
  }
  return Status::OK();
}

StatusOr<FileIdentity> MemoryFile::Stat() const {
  FileIdentity now = identity_;
  now.size = visible_->load();
  return now;
}

StatusOr<std::unique_ptr<File>> MemoryFile::Reopen(Backend,
                                                   const IoOptions&) const {
  return std::unique_ptr<File>(
      new MemoryFile(path_, bytes_, alignment_, visible_));
}

}  // namespace weightlift::internal
