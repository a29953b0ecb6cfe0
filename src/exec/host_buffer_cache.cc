#include "exec/host_buffer_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "util/errno_text.h"

namespace weightlift::internal {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

std::shared_ptr<HostBufferCache> HostBufferCache::Create(
    uint64_t limit_bytes, uint64_t max_buffer_bytes) {
  return std::shared_ptr<HostBufferCache>(
      new HostBufferCache(limit_bytes, max_buffer_bytes));
}

HostBufferCache::~HostBufferCache() {
  for (auto& [bytes, p] : free_) ::munmap(p, bytes);
}

std::shared_ptr<void> HostBufferCache::Own(void* p, uint64_t bytes) {
  std::weak_ptr<HostBufferCache> cache = weak_from_this();
  return std::shared_ptr<void>(p, [cache, bytes](void* q) {
    if (auto c = cache.lock()) {
      c->Release(q, bytes);
    } else {
      ::munmap(q, bytes);
    }
  });
}

StatusOr<HostBufferCache::Buffer> HostBufferCache::Acquire(uint64_t bytes,
                                                           bool huge) {
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
      const uint64_t have = it->first;
      void* p = it->second;
      free_.erase(it);
      cached_ -= have;
      return Buffer{Own(p, have), have, /*fresh=*/false};
    }
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return Status::ResourceExhausted(
        "cannot allocate " + std::to_string(bytes) +
        " bytes of host memory for tensors: mmap: " + ErrnoText(err));
  }
  if (huge && bytes >= (uint64_t{2} << 20)) {
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: may be refused
  }
  return Buffer{Own(p, bytes), bytes, /*fresh=*/true};
}

void HostBufferCache::Release(void* p, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes <= max_buffer_ && cached_ + bytes <= limit_) {
      free_.emplace(bytes, p);
      cached_ += bytes;
      return;
    }
  }
  ::munmap(p, bytes);
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
