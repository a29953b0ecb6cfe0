// The CUDA loader's sizes and thread counts, resolved once per loader from
// LoadOptions. Pure computation (no CUDA calls), so it is tested on every
// machine; the defaults here were tuned on the H200 (bench/gpu_sweep.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Host pages: host-register pieces are page-aligned, staging slots are
// multiples of it (so every slot suits O_DIRECT).
inline constexpr uint64_t kPageBytes = 4096;

struct CudaLoaderConfig {
  int threads = 1;           // workers per load
  int slots_per_thread = 2;  // staging slots per worker
  size_t slot_bytes = 0;     // one staging slot (= one read, one GDS read)
  size_t piece_bytes = 0;    // host-register piece
  int streams = 1;           // copy streams (workers share them round-robin)
  // Adjustments worth a line in every LoadReport (e.g. fewer threads).
  std::vector<std::string> notes;

  uint64_t ring_bytes() const {
    return static_cast<uint64_t>(slots_per_thread) * threads * slot_bytes;
  }
};

// Resolves OPTIONS for a machine with HARDWARE_THREADS (0: unknown).
// InvalidArgument when cuda_chunk_bytes is below 64 KiB, when staging_bytes
// holds fewer than 2 slots, or when a size does not fit once rounded up to
// whole pages.
StatusOr<CudaLoaderConfig> ResolveCudaConfig(const LoadOptions& options,
                                             unsigned hardware_threads);

}  // namespace weightlift::internal
