// prepare's entry to zero-copy loads (cuda/registered_pages.h), callable in
// every build: without CUDA it answers Unsupported (cuda_stub.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/request.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct RegisteringAhead {
  uint32_t files = 0;                // files whose pages are being registered
  uint64_t bytes = 0;                // their spans' bytes
  uint64_t left_bytes = 0;           // selected bytes left to staging
  std::vector<std::string> skipped;  // "PATH: why" per file left alone
};

// Starts registering with cuda:DEVICE, on a thread of its own, the pages of
// CKPT's files that a load of REQUESTS copies from, and puts them in CKPT's
// prepared slot (format/prepared_pages.h) for that load to take, replacing
// what an earlier prepare put. Returns at once. Only files at least
// RESIDENT_THRESHOLD resident take part: registering pages that are not
// cached would read them from storage, where O_DIRECT staging is the
// faster path. Unless FORCED (host_register=on), the selections that
// SplitByPageCost (plan/page_spans.h) finds not worth their pages are left
// to staging (the load's report says how much); when that leaves nothing,
// every file is skipped, saying so. Errors: the requests' (NotFound,
// SelectSlice's), a file that changed since CKPT was opened, Unsupported
// without CUDA or where the device cannot register read-only host memory.
StatusOr<RegisteringAhead> RegisterPagesAhead(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests, int device,
    double resident_threshold, bool forced);

}  // namespace weightlift::internal
