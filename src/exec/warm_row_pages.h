// prepare's half of the row-page filling (src/env/warm_mappings.h): which
// runs a load of a request will copy out of a mapping, and starting their
// fill on the checkpoint's WarmMappings.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/request.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct WarmedRows {
  uint32_t files = 0;                // files whose mapping is being filled
  uint64_t runs = 0;                 // row runs in them
  uint64_t bytes = 0;                // the runs' bytes
  std::vector<std::string> skipped;  // "PATH: why" per file left alone
};

// Starts filling, on a thread of CKPT's WarmMappings, the page tables of the
// row runs that a buffered load of REQUESTS copies out of a mapping: the
// blocks of more than one row at most kMappedRowsMaxPitch apart
// (mapped_rows_file.h), in files at least RESIDENT_THRESHOLD resident (as
// the auto backend decides: a file that is not resident is read with
// O_DIRECT, and filling its pages would read them from storage). Returns
// at once. A request with no such runs starts nothing. Errors: the
// requests' (NotFound, SelectSlice's), and a file that changed since CKPT
// was opened.
StatusOr<WarmedRows> WarmRowPages(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  double resident_threshold);

}  // namespace weightlift::internal
