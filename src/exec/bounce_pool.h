// The host loader's staging memory: one anonymous Mapping (env/mapping.h,
// the library's one mmap owner) split into slots, allocated once per loader.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "env/mapping.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Slots of slot_bytes (a multiple of 4096, so every slot is 4096-aligned
// and suits O_DIRECT). Pages are touched only when a slot is first used, so
// untouched slots cost no RSS.
class BouncePool {
 public:
  // TOTAL_BYTES / SLOT_BYTES slots (at least one); slot_bytes rounded up to
  // 4096. ResourceExhausted if the mapping fails.
  static StatusOr<std::unique_ptr<BouncePool>> Create(size_t total_bytes,
                                                      size_t slot_bytes);
  BouncePool(const BouncePool&) = delete;
  BouncePool& operator=(const BouncePool&) = delete;

  size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }
  size_t total_bytes() const { return total_bytes_; }
  // All the slots' memory (io_uring registers it: IoOptions::fixed_buffers).
  std::span<std::byte> memory() const { return {memory_.data(), total_bytes_}; }

  // Blocks until a slot is free; returns its number. Thread-safe.
  int Acquire();
  void Release(int slot);
  std::byte* slot(int i) const { return memory_.data() + i * slot_bytes_; }

 private:
  BouncePool(Mapping memory, size_t total, size_t slot, int slots);
  Mapping memory_;
  size_t total_bytes_;
  size_t slot_bytes_;
  int slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> free_;
};

}  // namespace weightlift::internal
