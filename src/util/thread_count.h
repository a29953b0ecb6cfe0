// How many worker threads a load uses: the one rule, for every loader.
#pragma once

namespace weightlift::internal {

// What the workers mostly do; each wants a different count by default.
enum class ThreadUse {
  // Buffered reads (page-cache copies): CPU-bound, one thread per core, at
  // most 8.
  kBufferedReads,
  // O_DIRECT reads on the host: threads mostly wait on the device, so twice
  // the buffered count, at least 4 and at most 16 (measured on the 2-core
  // development VM: bench/results/host-*.md).
  kDirectReads,
  // Reads into pinned staging slots plus host-to-device copies: one thread
  // per core, at most 16 (the H200 sweep's best, bench/gpu_sweep.cc).
  kCudaStaging,
};

// options.threads resolved for USE: REQUESTED when it is positive, else the
// default above for a machine with HARDWARE_THREADS cores (0: unknown, taken
// as 8).
int ThreadCount(int requested, ThreadUse use, unsigned hardware_threads);

// The same on this machine (std::thread::hardware_concurrency()).
int ThreadCount(int requested, ThreadUse use);

}  // namespace weightlift::internal
