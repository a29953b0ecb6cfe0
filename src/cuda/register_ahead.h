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

// A selection's pages are registered ahead while they are at most this
// many times its bytes (plus two pages: a small tensor's edges). A row-parallel
// part's pages are its tensor's whole rows, which every rank would register: on
// the H200 a rank of 8 of Llama-2-7B registered 5.38 GB for 1.91 GB (2.8x) and
// loaded no faster alone (43.5-43.7 GB/s against 42.8-45.5 staged), while eight
// ranks pinning the same pages at once could not finish in time and loaded
// slower together (0.74-0.80x of the ceiling against 0.82-0.84x); a rank of
// 4 (1.8x) gained, 49.9-50.6 against 44.1-47.4 GB/s alone and 0.90-0.95x
// against 0.85-0.87x together (session 21, calls C and D; C ran on an H100).
// So such parts (4x and more from n = 4) are left to staging, which copies
// them in the same run as the registered pages (split_sink.h).
inline constexpr double kMaxRegisteredPerSelected = 2.0;

// Starts registering with cuda:DEVICE, on a thread of its own, the pages of
// CKPT's files that a load of REQUESTS copies from, and puts them in CKPT's
// prepared slot (format/prepared_pages.h) for that load to take, replacing
// what an earlier prepare put. Returns at once. Only files at least
// RESIDENT_THRESHOLD resident take part: registering pages that are not
// cached would read them from storage, where O_DIRECT staging is the
// faster path. Unless FORCED (host_register=on), a selection whose pages
// are more than kMaxRegisteredPerSelected times its bytes is left to
// staging (the load's report says how much); when that leaves nothing,
// every file is skipped, saying so. Errors: the requests' (NotFound,
// SelectSlice's), a file that changed since CKPT was opened, Unsupported
// without CUDA or where the device cannot register read-only host memory.
StatusOr<RegisteringAhead> RegisterPagesAhead(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests, int device,
    double resident_threshold, bool forced);

}  // namespace weightlift::internal
