// A read-only shared mapping of a whole file, for the host-register path
// (the copies go straight from the mapping). Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weightlift/status.h"

namespace weightlift::internal {

class FileMapping {
 public:
  FileMapping() = default;
  // Maps PATH, which must still be EXPECT_SIZE bytes (the header's view);
  // IoError naming the path and errno otherwise. An empty file maps to null.
  static StatusOr<FileMapping> Map(const std::string& path,
                                   uint64_t expect_size);
  FileMapping(FileMapping&& o) noexcept { *this = std::move(o); }
  FileMapping& operator=(FileMapping&& o) noexcept;
  ~FileMapping() { Reset(); }
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void Reset();
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace weightlift::internal
