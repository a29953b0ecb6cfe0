// What prepare left ready for a checkpoint's next load beyond its row pages
// (env/warm_mappings.h): today, pages of its files registered with a CUDA
// device (cuda/registered_pages.h). The checkpoint holds one slot, shared by
// its copies; prepare puts, the next load takes. This header knows nothing
// of CUDA: the loader that can use what it takes recognizes it.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace weightlift::internal {

class PreparedPages {
 public:
  virtual ~PreparedPages() = default;
};

class PreparedPagesSlot {
 public:
  // Replaces what an earlier prepare put (which is freed, unless a load
  // holds it).
  void Put(std::shared_ptr<PreparedPages> p) {
    std::shared_ptr<PreparedPages> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::exchange(p_, std::move(p));
    }
  }
  // For one load: what prepare put, or null; the slot is empty after.
  std::shared_ptr<PreparedPages> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(p_, nullptr);
  }
  // Gives back what Take took and the load did not use (it was made for
  // another load), unless a newer prepare put something since.
  void Restore(std::shared_ptr<PreparedPages> p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (p_ == nullptr) p_ = std::move(p);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<PreparedPages> p_;
};

}  // namespace weightlift::internal
