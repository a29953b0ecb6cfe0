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
  // Reads into pinned staging slots plus host-to-device copies: at most 16
  // (bench/gpu_sweep.cc). A process loading alone leaves a quarter of its
  // cores to the caller's own threads (Python, the job thread, torch):
  // on the 16-core H200 host, 12 workers started in 0.4 ms against 2.3-3.2
  // for 16 (the 17th and 18th busy threads waited for a core), later loads
  // ran 0.4% faster, a tensor-parallel rank alone at n = 2 / 4 delivered
  // 45.9-46.2 / 39.0-41.7 GB/s against 41.8-42.7 / 37.0-39.6
  // (bench/results/2026-12-04-h200-session10, calls D and E). Processes
  // sharing the host (local_world_size) take their share of all the cores,
  // as before: not measured with headroom.
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
