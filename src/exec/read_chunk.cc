#include "exec/read_chunk.h"

#include <span>

namespace weightlift::internal {

Status ReadChunkBytes(File& file, const ReadChunk& c, std::byte* buf) {
  if (c.rows <= 1) return file.ReadAt(c.offset, std::span(buf, c.length));
  return file.ReadRows(c.offset, c.pitch, c.length / c.rows, c.rows, buf);
}

}  // namespace weightlift::internal
