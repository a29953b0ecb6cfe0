// The host executor: runs a Plan into host memory with a thread pool.
//
// Direct chunks are read straight into their destination; bounce chunks are
// read into a slot of a BouncePool (allocated once per loader) and copied
// out. Each tensor's pieces are counted down and on_ready fires once, from
// the worker that delivered the last piece. The first error stops every
// worker from taking more chunks; Run returns it after all have joined.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "env/file.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Staging memory: a single anonymous mapping split into slots of
// slot_bytes (a multiple of 4096, so every slot is 4096-aligned). Pages are
// touched only when a slot is first used, so untouched slots cost no RSS.
class BouncePool {
 public:
  // TOTAL_BYTES / SLOT_BYTES slots (at least one); slot_bytes rounded up to
  // 4096. ResourceExhausted if the mapping fails.
  static StatusOr<std::unique_ptr<BouncePool>> Create(size_t total_bytes,
                                                      size_t slot_bytes);
  ~BouncePool();
  BouncePool(const BouncePool&) = delete;
  BouncePool& operator=(const BouncePool&) = delete;

  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }
  size_t total_bytes() const { return total_bytes_; }
  // All the slots' memory (io_uring registers it: IoOptions::fixed_buffers).
  std::span<std::byte> memory() const { return {base_, total_bytes_}; }

  // Blocks until a slot is free. Thread-safe.
  std::byte* Acquire();
  void Release(std::byte* slot);

 private:
  BouncePool(std::byte* base, size_t total, size_t slot, int slots);
  std::byte* base_;
  size_t total_bytes_;
  size_t slot_bytes_;
  int slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::byte*> free_;
};

struct ExecCallbacks {
  // Tensor T (the Segment::tensor number) has all its bytes in place.
  std::function<void(uint32_t tensor)> on_ready;
  // Bytes delivered so far, through a ProgressReporter (ordered, never
  // concurrent, at most every kDefaultInterval), plus one final call on
  // success.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // Names tensor T in error messages; may be empty.
  std::function<std::string(uint32_t tensor)> tensor_name;
  // Workers to use; 0 or more than the pool has: the whole pool.
  int threads = 0;
  // When set, holds the index of the next plan chunk a worker will take
  // (chunks are taken in plan order), so a helper working ahead of the
  // workers (the host loader's page populator) can skip what they passed.
  std::atomic<size_t>* next_chunk = nullptr;
};

struct ExecStats {
  uint64_t bytes_read = 0;
  uint64_t bytes_delivered = 0;
  uint64_t direct_chunks = 0;
  uint64_t bounce_chunks = 0;
  int threads = 0;
};

// Runs PLAN. FILES[i] serves the plan's file i (null for files the plan does
// not read). Tensors with no pieces (empty tensors) are reported ready first.
// REQUIRES: plan.max_bounce_bytes <= bounce.slot_bytes(); every direct_dst
// and scatter dst is writable host memory of the planned length.
Status RunHostPlan(const Plan& plan, std::span<File* const> files,
                   ThreadPool& pool, BouncePool& bounce,
                   const ExecCallbacks& callbacks, ExecStats* stats);

}  // namespace weightlift::internal
