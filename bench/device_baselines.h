// Device-side baselines for `weightlift bench` and bench/gpu_sweep: the
// ceiling a CUDA load is measured against, and what plain safetensors does.
// Benchmark code, not library code: it lives in wl_bench. Without CUDA
// compiled in (or with no device) each returns an error with the reason.
#pragma once

#include <cstdint>

#include "weightlift/checkpoint.h"
#include "weightlift/status.h"

namespace weightlift::bench {

// The pinned host->device copy ceiling in GB/s (1e9 bytes/s): BYTES of
// pinned memory copied to the device in 64 MiB cudaMemcpyAsync pieces on one
// stream, median of 5 timed runs after a warm-up.
StatusOr<double> MeasurePinnedCopyGBps(int device, uint64_t bytes = 4ull << 30);

// What plain safetensors does for device="cuda": mmap each file, then one
// synchronous cudaMemcpy per tensor from the pageable mapping into its own
// cudaMalloc'ed buffer. Returns wall seconds (open to last byte on the
// device, buffers freed afterwards, not timed).
StatusOr<double> NaiveMmapToDevice(const Checkpoint& ckpt, int device);

}  // namespace weightlift::bench
