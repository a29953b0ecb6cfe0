// Maps the page-cache pages of a plan's row-run chunks ahead of the workers,
// on cores the load leaves idle.
//
// A tensor-parallel rank's row-parallel weights are read as row runs (one
// short run per row, ReadChunk::rows > 1) copied out of a mapping of the
// page cache (env/mapped_rows_file.h). Their cost is the page faults that
// map the covering range, not the bytes: on the H200 (session 12, call E,
// bench/results/2026-12-04-h200-session12/) rank 0 of 8 with every tensor
// split as row runs moved 28 GB/s where the same bytes as contiguous
// slices moved 49 GB/s. The faults are CPU work the readers do between
// their reads; done first by other threads (File::PrefaultRows), the
// readers find the page tables filled and only copy.
//
// Like Populator: threads take row chunks in plan order from one cursor
// and skip the chunks the workers have already taken (RunOptions::
// next_chunk). Purely advisory: a chunk it did not reach, or could not
// prefault, is read exactly as without it.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <thread>
#include <vector>

#include "env/file.h"
#include "plan/plan.h"

namespace weightlift::internal {

class RowsPrefaulter {
 public:
  // The threads for a run of WORKERS readers on a machine of
  // HARDWARE_THREADS cores shared by SHARING processes loading at once
  // (LoadOptions::local_world_size): the cores this process's share leaves
  // idle, less one for the caller, at most 4; 0 when there are none.
  static int SpareThreads(unsigned hardware_threads, int sharing, int workers);

  // Whether PLAN has row-run chunks (nothing to do otherwise).
  static bool Wanted(const Plan& plan);

  // Starts THREADS (>= 1) threads over PLAN's row-run chunks, read from
  // FILES (indexed by ReadChunk::file); NEXT_CHUNK is the executor's. All
  // three must outlive Finish.
  RowsPrefaulter(const Plan& plan, std::span<File* const> files,
                 std::atomic<size_t>* next_chunk, int threads);
  ~RowsPrefaulter() { Finish(); }
  RowsPrefaulter(const RowsPrefaulter&) = delete;
  RowsPrefaulter& operator=(const RowsPrefaulter&) = delete;

  // Stops and joins the threads. Returns how many chunks were prefaulted.
  size_t Finish();

 private:
  void Loop();

  const Plan& plan_;
  std::span<File* const> files_;
  std::vector<size_t> row_chunks_;  // plan indices, in plan order
  std::atomic<size_t>* next_chunk_;
  std::atomic<size_t> cursor_{0};
  std::atomic<size_t> done_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace weightlift::internal
