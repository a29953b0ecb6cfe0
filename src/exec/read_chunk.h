// The one place where a plan chunk's bytes are read from its file.
#pragma once

#include <cstddef>

#include "env/file.h"
#include "plan/plan.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Reads chunk C of FILE into BUF (c.length bytes: the chunk's destination
// when it is direct, else a staging or bounce slot). A gather chunk
// (c.rows > 1) is one File::ReadRows: its runs packed back to back in BUF
// (one ReadAt per run, or copies out of a mapping where the File offers
// that, env/mapped_rows_file.h); a failed run's error names its offset and
// length.
Status ReadChunkBytes(File& file, const ReadChunk& c, std::byte* buf);

}  // namespace weightlift::internal
