// ForwardingFile: a File that is another File with some of its calls
// replaced, the base of the loader's wrappers (rows from a mapping,
// mapped_rows_file.h; a cold file's read cost, cold_file.h). Every call goes
// to the inner File unless a subclass overrides it, so a wrapper states only
// what it changes.
#pragma once

#include <memory>
#include <utility>

#include "env/file.h"

namespace weightlift::internal {

class ForwardingFile : public File {
 public:
  explicit ForwardingFile(std::unique_ptr<File> inner)
      : inner_(std::move(inner)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    return inner_->ReadAt(offset, dst);
  }
  Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                  uint64_t rows, std::byte* dst) override {
    return inner_->ReadRows(offset, pitch, width, rows, dst);
  }
  StatusOr<FileIdentity> Stat() const override { return inner_->Stat(); }
  StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const override {
    return inner_->Reopen(backend, options);
  }
  StatusOr<Mapping> Map(uint64_t offset, uint64_t length,
                        MapAccess access) const override {
    return inner_->Map(offset, length, access);
  }
  const std::string& path() const override { return inner_->path(); }
  const FileIdentity& identity() const override { return inner_->identity(); }
  size_t alignment() const override { return inner_->alignment(); }
  std::string_view backend_name() const override {
    return inner_->backend_name();
  }
  int native_fd() const override { return inner_->native_fd(); }
  std::string Degraded() const override { return inner_->Degraded(); }
  CopiedRows copied_rows() const override { return inner_->copied_rows(); }
  uint64_t registered_buffer_reads() const override {
    return inner_->registered_buffer_reads();
  }
  uint64_t read_cost_bytes() const override {
    return inner_->read_cost_bytes();
  }

 protected:
  File& inner() const { return *inner_; }

 private:
  std::unique_ptr<File> inner_;
};

}  // namespace weightlift::internal
