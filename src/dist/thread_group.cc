#include "dist/thread_group.h"

#include <cstring>
#include <string>

namespace weightlift::internal {

class ThreadGroup::Rank : public GroupTransport {
 public:
  Rank(ThreadGroup* g, int r) : g_(g), r_(r) {}
  int rank() const override { return r_; }
  int size() const override { return g_->size_; }
  std::optional<Device> memory_device() const override {
    return Device::Cpu();  // memcpy between host buffers
  }

  Status Broadcast(void* data, uint64_t bytes, int root) override {
    if (root < 0 || root >= g_->size_) {
      return Status::InvalidArgument("broadcast root " + std::to_string(root) +
                                     " outside the group");
    }
    return g_->Exchange(r_, data, "broadcast", [&](void* const* posted) {
      if (r_ != root && bytes) {
        std::memcpy(data, posted[root], bytes);
      }
    });
  }

  Status AllGather(void* data, uint64_t part_bytes) override {
    return g_->Exchange(r_, data, "all_gather", [&](void* const* posted) {
      for (int s = 0; s < g_->size_; ++s) {
        if (s == r_ || !part_bytes) continue;
        const uint64_t at = static_cast<uint64_t>(s) * part_bytes;
        std::memcpy(static_cast<char*>(data) + at,
                    static_cast<const char*>(posted[s]) + at, part_bytes);
      }
    });
  }

 private:
  ThreadGroup* g_;
  int r_;
};

ThreadGroup::ThreadGroup(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), posted_(static_cast<size_t>(size)) {
  for (int r = 0; r < size; ++r)
    ranks_.push_back(std::make_unique<Rank>(this, r));
}

ThreadGroup::~ThreadGroup() = default;

GroupTransport& ThreadGroup::rank(int r) {
  return *ranks_[static_cast<size_t>(r)];
}

template <typename Copy>
Status ThreadGroup::Exchange(int r, void* data, const char* what, Copy copy) {
  std::unique_lock<std::mutex> lock(mu_);
  auto timed_out = [&] {
    broken_ = true;
    cv_.notify_all();
    return Status::IoError(std::string(what) + " on rank " + std::to_string(r) +
                           " of " + std::to_string(size_) +
                           ": not every rank joined within " +
                           std::to_string(timeout_.count()) + " ms");
  };
  if (broken_) return Status::IoError("the thread group broke earlier");
  // Phase 1: everyone posts.
  while (departed_ != 0) {  // the previous collective is still draining
    if (!cv_.wait_for(lock, timeout_,
                      [&] { return departed_ == 0 || broken_; }) ||
        broken_) {
      return timed_out();
    }
  }
  const uint64_t gen = generation_;
  posted_[static_cast<size_t>(r)] = data;
  if (++arrived_ == size_) {
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, timeout_,
                           [&] {
                             return arrived_ == size_ || generation_ != gen ||
                                    broken_;
                           }) ||
             broken_) {
    return timed_out();
  }
  // Phase 2: copy from the posted buffers (no one leaves before all copied).
  lock.unlock();
  copy(posted_.data());
  lock.lock();
  if (++departed_ == size_) {
    arrived_ = 0;
    departed_ = 0;
    ++generation_;
    cv_.notify_all();
  } else if (!cv_.wait_for(lock, timeout_,
                           [&] { return generation_ != gen || broken_; }) ||
             broken_) {
    return timed_out();
  }
  return Status::OK();
}

}  // namespace weightlift::internal
