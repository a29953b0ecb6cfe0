#include "exec/completion.h"

#include <utility>

namespace weightlift::internal {

CompletionTracker::CompletionTracker(size_t tensors,
                                     std::function<void(uint32_t)> on_ready,
                                     ProgressReporter::Callback on_progress,
                                     uint64_t total)
    : tensors_(tensors),
      remaining_(new std::atomic<uint32_t>[tensors]),
      on_ready_(std::move(on_ready)),
      progress_(std::move(on_progress), total,
                ProgressReporter::kDefaultInterval) {
  for (size_t t = 0; t < tensors; ++t) {
    remaining_[t].store(0, std::memory_order_relaxed);
  }
}

void CompletionTracker::AddPieces(const Plan& plan) {
  for (size_t t = 0; t < plan.pieces_per_tensor.size() && t < tensors_; ++t) {
    remaining_[t].fetch_add(plan.pieces_per_tensor[t],
                            std::memory_order_relaxed);
  }
}

void CompletionTracker::Start() {
  for (size_t t = 0; t < tensors_; ++t) {
    if (remaining_[t].load(std::memory_order_acquire) == 0) {
      Ready(static_cast<uint32_t>(t));
    }
  }
}

void CompletionTracker::Fail(Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_error_.ok()) first_error_ = std::move(s);
  failed_.store(true, std::memory_order_relaxed);
}

Status CompletionTracker::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

}  // namespace weightlift::internal
