// An in-memory File for tests: the bytes live in a vector, optionally with a
// simulated direct-I/O alignment so that planner and executor alignment bugs
// surface as InvalidArgument without touching a disk.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "env/file.h"

namespace weightlift::internal {

class MemoryFile final : public File {
 public:
  // ALIGNMENT 1 behaves like a buffered backend; > 1 enforces ReadAt's
  // O_DIRECT contract (offset, address and length aligned, the tail
  // rounded up into the caller's room).
  MemoryFile(std::string path, std::vector<std::byte> bytes,
             size_t alignment = 1);

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override;
  // The identity with the size Truncate left visible.
  StatusOr<FileIdentity> Stat() const override;
  // A MemoryFile over the same bytes (shared, not copied) for every
  // backend; the alignment stays.
  StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const override;
  const std::string& path() const override { return path_; }
  const FileIdentity& identity() const override { return identity_; }
  size_t alignment() const override { return alignment_; }
  std::string_view backend_name() const override { return "memory"; }

  // Simulates the file shrinking after open: reads past NEW_SIZE fail with
  // IoError and Stat() reports NEW_SIZE; identity() keeps the size at
  // construction.
  void Truncate(uint64_t new_size) { visible_->store(new_size); }

 private:
  MemoryFile(std::string path,
             std::shared_ptr<const std::vector<std::byte>> bytes,
             size_t alignment, std::shared_ptr<std::atomic<uint64_t>> visible);

  std::string path_;
  std::shared_ptr<const std::vector<std::byte>> bytes_;
  FileIdentity identity_;
  size_t alignment_;
  std::shared_ptr<std::atomic<uint64_t>> visible_;
};

}  // namespace weightlift::internal
