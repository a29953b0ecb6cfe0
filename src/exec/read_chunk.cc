#include "exec/read_chunk.h"

#include <span>

namespace weightlift::internal {

Status ReadChunkBytes(File& file, const ReadChunk& c, std::byte* buf) {
  if (c.rows <= 1) return file.ReadAt(c.offset, std::span(buf, c.length));
  const uint64_t width = c.length / c.rows;
  for (uint64_t r = 0; r < c.rows; ++r) {
    WL_RETURN_IF_ERROR(
        file.ReadAt(c.offset + r * c.pitch, std::span(buf + r * width, width)));
  }
  return Status::OK();
}

}  // namespace weightlift::internal
