#include "exec/read_chunk.h"

#include <span>

namespace weightlift::internal {

Status ReadChunkBytes(File& file, const ReadChunk& c, std::byte* buf) {
  return file.ReadAt(c.offset, std::span(buf, c.length));
}

}  // namespace weightlift::internal
