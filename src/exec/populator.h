// Faults in the pages of a fresh host destination ahead of the readers, in
// plan order, with MADV_POPULATE_WRITE: the kernel allocates (zeroes) the
// pages without writing our data, so it is safe while readers write the
// same pages (memset would not be). First touch of fresh memory is
// expensive (in a VM every new page may also fault in the hypervisor); done
// here it overlaps the storage reads instead of stalling a reader in the
// middle of its memcpy or DMA. Stops at the first refusal (EINVAL before
// Linux 5.14): readers then fault pages in themselves, as without it.
//
// Several threads: on a large machine one populating thread's first touch
// is slower than its NVMe, so THREADS threads (DefaultThreads) take 4 MiB
// pieces in plan order from one cursor. Not huge pages: see host_loader.cc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "plan/plan.h"

namespace weightlift::internal {

// Whether host memory at DSTS (SIZES[k] bytes at DSTS[k]) is mostly
// fresh: of up to 64 pages sampled evenly over its bytes, mincore finds
// fewer than half resident. A caller's memory is often fresh too (a
// tensor just made by torch.empty, a group load's buffers), and then a
// Populator pays off as it does for the loader's own. False when mincore
// refuses an address (not memory a process mapping holds) or for less
// than 1 MiB (too little for a populating thread to pay, and not worth
// the samples).
bool MostlyFresh(std::span<const uintptr_t> dsts,
                 std::span<const uint64_t> sizes);

class Populator {
 public:
  // Starts THREADS (>= 1) threads over PLAN's host destinations;
  // NEXT_CHUNK is the executor's (RunOptions::next_chunk). Both must
  // outlive Finish.
  Populator(const Plan& plan, std::atomic<size_t>* next_chunk, int threads);
  ~Populator() { (void)Finish(); }
  Populator(const Populator&) = delete;
  Populator& operator=(const Populator&) = delete;
  // Populating threads for one load: one per 8 hardware threads, 1 to 4.
  // On the 2-core development VM, 1 and 2 could not be told apart (two
  // interleaved A/Bs of cold 3.2 GB loads disagreed, the shared disk moving
  // +-20%; bench/results/2026-12-03-devbox-host-disk-limit-2); more on
  // large machines, whose NVMe outruns one thread's first touch (not
  // measured yet).
  static int DefaultThreads();
  // Stops and joins the threads; returns madvise's errno if the kernel
  // refused (0 if it never did).
  int Finish();

 private:
  // A page-aligned range of at most 4 MiB of chunk CHUNK's destinations.
  struct Piece {
    uintptr_t lo = 0;
    uintptr_t hi = 0;
    size_t chunk = 0;
  };
  void Loop();

  std::vector<Piece> pieces_;
  std::atomic<size_t>* next_chunk_;
  std::atomic<size_t> next_piece_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::vector<std::thread> threads_;
};

}  // namespace weightlift::internal
