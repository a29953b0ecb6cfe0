// How many worker threads a load uses: the one rule, for every loader.
#pragma once

#include <string>

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
// as 8) shared by SHARING processes loading at once (options.
// local_world_size): each gets its share of the cores, at least one.
int ThreadCount(int requested, ThreadUse use, unsigned hardware_threads,
                int sharing = 1);

// The same on this machine (std::thread::hardware_concurrency()), one
// process alone.
int ThreadCount(int requested, ThreadUse use);

// The report's line when SHARING > 1 changed the automatic count to THREADS
// on a machine of HARDWARE_THREADS cores (0: unknown); empty when REQUESTED
// is positive or SHARING is 1.
std::string SharedCoresNote(int requested, int threads,
                            unsigned hardware_threads, int sharing);

}  // namespace weightlift::internal
