#include "exec/bounce_pool.h"

#include <algorithm>

namespace weightlift::internal {

StatusOr<std::unique_ptr<BouncePool>> BouncePool::Create(size_t total_bytes,
                                                         size_t slot_bytes) {
  slot_bytes = (std::max<size_t>(slot_bytes, 1) + 4095) / 4096 * 4096;
  const size_t slots = std::max<size_t>(1, total_bytes / slot_bytes);
  const size_t total = slots * slot_bytes;
  WL_ASSIGN_OR_RETURN(Mapping memory,
                      Mapping::Anonymous(total, "bounce (staging) memory"));
  return std::unique_ptr<BouncePool>(new BouncePool(
      std::move(memory), total, slot_bytes, static_cast<int>(slots)));
}

BouncePool::BouncePool(Mapping memory, size_t total, size_t slot, int slots)
    : memory_(std::move(memory)),
      total_bytes_(total),
      slot_bytes_(slot),
      slots_(slots) {
  free_.reserve(slots);
  // Hand out low slots first (LIFO) so a small load touches few pages.
  for (int i = slots - 1; i >= 0; --i) free_.push_back(i);
}

int BouncePool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !free_.empty(); });
  const int s = free_.back();
  free_.pop_back();
  return s;
}

void BouncePool::Release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_one();
}

}  // namespace weightlift::internal
