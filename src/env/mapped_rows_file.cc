#include "env/mapped_rows_file.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "env/io_util.h"
#include "util/errno_text.h"

namespace weightlift::internal {
namespace {

class RowsFromMappingFile final : public File {
 public:
  explicit RowsFromMappingFile(std::unique_ptr<File> base)
      : base_(std::move(base)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    return base_->ReadAt(offset, dst);
  }

  Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                  uint64_t rows, std::byte* dst) override {
    if (rows <= 1 || width == 0 || pitch > kMappedRowsMaxPitch ||
        refused_.load(std::memory_order_relaxed) != 0) {
      return base_->ReadRows(offset, pitch, width, rows, dst);
    }
    // pitch <= kMappedRowsMaxPitch (64 KiB): no overflow for any row count
    // a file can hold.
    const uint64_t cover = (rows - 1) * pitch + width;
    if (rows > size() / pitch + 1 || offset > size() ||
        cover > size() - offset) {
      // Past the end: the base's reads name the run that fails.
      return base_->ReadRows(offset, pitch, width, rows, dst);
    }
    StatusOr<Mapping> map = base_->Map(offset, cover, MapAccess::kReadShared);
    if (!map.ok()) {
      if (map.status().code() == StatusCode::kUnsupported) {
        refused_.store(ENODEV, std::memory_order_relaxed);
      }
      return base_->ReadRows(offset, pitch, width, rows, dst);
    }
    const int err = PopulateRuns(*map, offset, offset, pitch, width, rows);
    if (err == EFAULT) return ShrankUnderMapping(path(), offset, cover);
    if (err != 0) {
      if (err == EINVAL || err == ENOSYS || err == EPERM) {
        refused_.store(err, std::memory_order_relaxed);
      }
      // ENOMEM, EIO, ...: the base's reads say what is wrong, if anything.
      return base_->ReadRows(offset, pitch, width, rows, dst);
    }
    CopyRows(map->data(), pitch, width, rows, dst);
    runs_.fetch_add(rows, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }

  StatusOr<FileIdentity> Stat() const override { return base_->Stat(); }
  StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const override {
    return base_->Reopen(backend, options);
  }
  StatusOr<Mapping> Map(uint64_t offset, uint64_t length,
                        MapAccess access) const override {
    return base_->Map(offset, length, access);
  }
  const std::string& path() const override { return base_->path(); }
  const FileIdentity& identity() const override { return base_->identity(); }
  size_t alignment() const override { return base_->alignment(); }
  std::string_view backend_name() const override {
    return base_->backend_name();
  }
  int native_fd() const override { return base_->native_fd(); }
  uint64_t registered_buffer_reads() const override {
    return base_->registered_buffer_reads();
  }
  std::string Degraded() const override {
    std::string s = base_->Degraded();
    auto add = [&s](const std::string& line) {
      s += (s.empty() ? "" : "; ") + line;
    };
    if (const uint64_t runs = runs_.load(); runs > 0) {
      add(std::to_string(runs) + " row runs in " +
          std::to_string(calls_.load()) +
          " strided reads copied from a mapping of the page cache");
    }
    if (const int err = refused_.load(); err != 0) {
      add(err == ENODEV
              ? "row runs read one " + std::string(base_->backend_name()) +
                    " each: the file cannot be mapped"
              : "row runs read one " + std::string(base_->backend_name()) +
                    " each: MADV_POPULATE_READ refused (" + ErrnoName(err) +
                    ")");
    }
    return s;
  }

 private:
  std::unique_ptr<File> base_;
  // 0 until the base cannot be mapped (ENODEV) or the kernel refuses
  // MADV_POPULATE_READ; then every ReadRows goes to the base.
  std::atomic<int> refused_{0};
  std::atomic<uint64_t> runs_{0}, calls_{0};
};

}  // namespace

std::unique_ptr<File> WithRowsFromMapping(std::unique_ptr<File> base) {
  return std::make_unique<RowsFromMappingFile>(std::move(base));
}

int PopulateRuns(const Mapping& map, uint64_t map_offset, uint64_t offset,
                 uint64_t pitch, uint64_t width, uint64_t rows) {
  if (rows == 0) return 0;
  const uint64_t first = offset - map_offset;
  if (rows == 1 || pitch - width < kSparseRunGapBytes) {
    return map.PopulateRead(first, (rows - 1) * pitch + width);
  }
  for (uint64_t r = 0; r < rows; ++r) {
    if (const int err = map.PopulateRead(first + r * pitch, width); err != 0) {
      return err;
    }
  }
  return 0;
}

void CopyRows(const std::byte* src, uint64_t pitch, uint64_t width,
              uint64_t rows, std::byte* dst) {
  for (uint64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * width, src + r * pitch, width);
  }
}

Status ShrankUnderMapping(const std::string& path, uint64_t offset,
                          uint64_t length) {
  return Status::IoError(
      "file shrank since it was opened (truncated?): pages of " +
      DescribeRange(path, offset, length) +
      " lie past its end (MADV_POPULATE_READ: EFAULT)");
}

}  // namespace weightlift::internal
