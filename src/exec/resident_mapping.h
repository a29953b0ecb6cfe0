// What prepare maps ahead of a load (the row pages it fills,
// warm_row_pages.h; the pages it registers with CUDA,
// cuda/register_ahead.h): a checkpoint file's mapping, only where the file
// is local and in the page cache. Mapping a file that is not would make
// prepare's work read it from storage, where the load's own reads are the
// faster path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "env/mapping.h"
#include "weightlift/checkpoint.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// A shared read-only mapping of all of CKPT.files()[I] when that file is
// local, at least RESIDENT_THRESHOLD resident and can be mapped; otherwise
// nullopt, with *SKIPPED set to "PATH: why". Errors: a file that changed
// since CKPT was opened (OpenForLoad's).
StatusOr<std::optional<Mapping>> MapResidentFile(const Checkpoint& ckpt,
                                                 uint32_t i,
                                                 double resident_threshold,
                                                 std::string* skipped);

}  // namespace weightlift::internal
