#include "exec/host_buffer_cache.h"

#include <algorithm>
#include <cerrno>
#include <string>

namespace weightlift::internal {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

std::shared_ptr<HostBufferCache> HostBufferCache::Create(
    uint64_t limit_bytes, uint64_t max_buffer_bytes) {
  return std::shared_ptr<HostBufferCache>(
      new HostBufferCache(limit_bytes, max_buffer_bytes));
}

HostBufferCache::~HostBufferCache() = default;  // unmaps what is cached

HostBufferCache::Buffer HostBufferCache::Own(Mapping m, bool fresh) {
  std::weak_ptr<HostBufferCache> cache = weak_from_this();
  const uint64_t bytes = m.size();
  std::byte* data = m.data();
  // The deleter holds the mapping; std::function-like copies of it share
  // one holder, so it is given back (or unmapped) exactly once.
  auto holder = std::make_shared<Mapping>(std::move(m));
  std::shared_ptr<void> memory(data, [cache, holder](void*) {
    if (auto c = cache.lock()) c->Release(std::move(*holder));
    // else: HOLDER unmaps when the last copy of this deleter goes.
  });
  return Buffer{std::move(memory), bytes, fresh};
}

StatusOr<HostBufferCache::Buffer> HostBufferCache::Acquire(uint64_t bytes) {
  if (bytes > UINT64_MAX - kPage) {
    return Status::ResourceExhausted("cannot allocate " +
                                     std::to_string(bytes) +
                                     " bytes of host memory for tensors");
  }
  bytes = std::max<uint64_t>((bytes + kPage - 1) / kPage * kPage, kPage);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    // A buffer up to twice the request: reuse beats a fresh mapping, but a
    // small load must not pin a large buffer that a later load could use.
    if (it != free_.end() && it->first / 2 <= bytes) {
      Mapping m = std::move(it->second);
      free_.erase(it);
      cached_ -= m.size();
      return Own(std::move(m), /*fresh=*/false);
    }
  }
  WL_ASSIGN_OR_RETURN(Mapping m,
                      Mapping::Anonymous(bytes, "host memory for tensors"));
  return Own(std::move(m), /*fresh=*/true);
}

void HostBufferCache::Release(Mapping m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t bytes = m.size();
    if (bytes <= max_buffer_ && cached_ + bytes <= limit_) {
      free_.emplace(bytes, std::move(m));
      cached_ += bytes;
      return;
    }
  }
  // Not kept: M unmaps on return, outside the lock.
}

uint64_t HostBufferCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

size_t HostBufferCache::cached_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.size();
}

}  // namespace weightlift::internal
