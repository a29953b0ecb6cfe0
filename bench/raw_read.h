// Storage and page-cache ceilings: read whole files as fast as this machine
// can, discarding the bytes. Benchmarks report the loader as a ratio of these
// numbers measured in the same run.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "weightlift/status.h"

namespace weightlift::internal {

struct RawReadOptions {
  int queue_depth = 16;             // direct: requests in flight
  uint64_t block_bytes = 1u << 20;  // bytes per request / read() call
  int threads = 1;                  // buffered: threads, each reading its
                                    // share (files split into equal ranges)
  // Buffered: when > 0, reads land in a pre-touched buffer of this many
  // bytes (per thread, cycled) instead of one block_bytes buffer. A 1 MiB
  // buffer stays in the CPU cache, so the copy never writes DRAM, which a
  // load into fresh destinations must; 256 MiB measures the copy to DRAM.
  uint64_t target_bytes = 0;
};

struct RawReadResult {
  uint64_t bytes = 0;
  double seconds = 0;
  std::string method;  // e.g. "O_DIRECT io_uring QD16 1 MiB"
  double gb_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  }
};

// Cold ceiling: every byte of PATHS, in order, with O_DIRECT through io_uring
// at queue_depth requests of block_bytes into a ring of 4096-aligned buffers.
// Without io_uring (not compiled in, or refused) it falls back to
// queue_depth threads of O_DIRECT pread and says so in `method`.
StatusOr<RawReadResult> RawDirectRead(std::span<const std::string> paths,
                                      const RawReadOptions& options = {});

// Warm ceiling: buffered read() of every byte of PATHS into a block_bytes
// buffer (one copy out of the page cache), with `threads` threads.
StatusOr<RawReadResult> RawBufferedRead(std::span<const std::string> paths,
                                        const RawReadOptions& options = {});

}  // namespace weightlift::internal
