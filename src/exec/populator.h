// Faults in the pages of a fresh host destination ahead of the readers, in
// plan order, with MADV_POPULATE_WRITE: the kernel allocates (zeroes) the
// pages without writing our data, so it is safe while readers write the
// same pages (memset would not be). First touch of fresh memory is
// expensive (in a VM every new page may also fault in the hypervisor); done
// here it overlaps the storage reads instead of stalling a reader in the
// middle of its memcpy or DMA. Stops at the first refusal (EINVAL before
// Linux 5.14): readers then fault pages in themselves, as without it.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>

#include "plan/plan.h"

namespace weightlift::internal {

class Populator {
 public:
  // Starts the thread over PLAN's host destinations; NEXT_CHUNK is the
  // executor's (RunOptions::next_chunk). Both must outlive Finish.
  Populator(const Plan& plan, std::atomic<size_t>* next_chunk);
  ~Populator() { (void)Finish(); }
  Populator(const Populator&) = delete;
  Populator& operator=(const Populator&) = delete;
  // Stops and joins the thread; returns madvise's errno if the kernel
  // refused (0 if it never did).
  int Finish();

 private:
  void Loop();

  const Plan& plan_;
  std::atomic<size_t>* next_chunk_;
  std::atomic<bool> stop_{false};
  int refused_ = 0;
  std::thread thread_;
};

}  // namespace weightlift::internal
