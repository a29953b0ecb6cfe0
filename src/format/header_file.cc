// ReadHeader: reads just the first 8 + N bytes of a checkpoint file.
#include <vector>

#include "env/env.h"
#include "format/header.h"

namespace weightlift::internal {

StatusOr<ParsedHeader> ReadHeader(File& file) {
  const std::string& path = file.path();
  const uint64_t file_size = file.size();
  if (file_size < 8) {
    WL_RETURN_IF_ERROR(CheckFraming(0, file_size, path));
  }
  std::byte prefix[8];
  WL_RETURN_IF_ERROR(file.ReadAt(0, prefix));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | static_cast<uint8_t>(prefix[i]);
  }
  // Refuse before allocating N bytes.
  WL_RETURN_IF_ERROR(CheckFraming(n, file_size, path));
  std::vector<std::byte> json(n);
  WL_RETURN_IF_ERROR(file.ReadAt(8, json));
  return ParseHeader(json, n, file_size, path);
}

StatusOr<ParsedHeader> ReadHeaderFile(const std::string& path) {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      Env::Default()->OpenForRead(path, Backend::kPread));
  return ReadHeader(*f);
}

}  // namespace weightlift::internal
