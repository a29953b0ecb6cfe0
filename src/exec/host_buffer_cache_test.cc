// HostBufferCache: reuse, bounds, and buffers that outlive the cache.
#include "exec/host_buffer_cache.h"

#include <gtest/gtest.h>

#include <cstring>

namespace weightlift::internal {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(HostBufferCache, FreedBufferIsReusedWithItsBytesAndNotFresh) {
  auto cache = HostBufferCache::Create(64 * kMiB, 32 * kMiB);
  void* first = nullptr;
  {
    auto b = cache->Acquire(5 * kMiB + 1);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_TRUE(b->fresh);
    EXPECT_EQ(b->bytes, 5 * kMiB + 4096) << "rounded up to whole pages";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->memory.get()) % 4096, 0u);
    std::memset(b->memory.get(), 0x5a, b->bytes);
    first = b->memory.get();
  }
  EXPECT_EQ(cache->cached_buffers(), 1u);
  EXPECT_EQ(cache->cached_bytes(), 5 * kMiB + 4096);
  auto again = cache->Acquire(5 * kMiB);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->fresh);
  EXPECT_EQ(again->memory.get(), first);
  EXPECT_EQ(again->bytes, 5 * kMiB + 4096);
  EXPECT_EQ(cache->cached_bytes(), 0u) << "taken out while in use";
  // The reused pages are the ones written before: nothing was remapped.
  EXPECT_EQ(static_cast<unsigned char*>(again->memory.get())[123], 0x5a);
}

TEST(HostBufferCache, OnlyBuffersUpToTwiceTheRequestAreReused) {
  auto cache = HostBufferCache::Create(64 * kMiB, 32 * kMiB);
  { auto b = cache->Acquire(16 * kMiB); }
  auto small = cache->Acquire(4 * kMiB);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->fresh) << "a 16 MiB buffer is not pinned by 4 MiB";
  EXPECT_EQ(cache->cached_bytes(), 16 * kMiB);
  auto near = cache->Acquire(9 * kMiB);
  ASSERT_TRUE(near.ok());
  EXPECT_FALSE(near->fresh);
  EXPECT_EQ(near->bytes, 16 * kMiB);
}

TEST(HostBufferCache, BoundsAreKept) {
  auto cache = HostBufferCache::Create(10 * kMiB, 4 * kMiB);
  { auto big = cache->Acquire(5 * kMiB); }
  EXPECT_EQ(cache->cached_buffers(), 0u) << "over max_buffer_bytes: unmapped";
  {
    auto a = cache->Acquire(4 * kMiB);
    auto b = cache->Acquire(4 * kMiB);
    auto c = cache->Acquire(4 * kMiB);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  }
  EXPECT_EQ(cache->cached_bytes(), 8 * kMiB) << "the third did not fit";
  auto none = HostBufferCache::Create(0, 4 * kMiB);
  { auto d = none->Acquire(kMiB); }
  EXPECT_EQ(none->cached_buffers(), 0u) << "limit 0 keeps nothing";
}

TEST(HostBufferCache, BufferOutlivesItsCache) {
  std::shared_ptr<void> kept;
  {
    auto cache = HostBufferCache::Create(64 * kMiB, 32 * kMiB);
    { auto pooled = cache->Acquire(kMiB); }  // cached, unmapped with cache
    auto b = cache->Acquire(2 * kMiB);
    ASSERT_TRUE(b.ok());
    kept = b->memory;
  }
  // The cache is gone; the buffer still works and unmaps itself (ASan
  // builds would flag a leak or a use after unmap).
  std::memset(kept.get(), 1, 2 * kMiB);
  kept.reset();
}

TEST(HostBufferCache, ImpossibleSizeIsResourceExhausted) {
  auto cache = HostBufferCache::Create(64 * kMiB, 32 * kMiB);
  auto b = cache->Acquire(UINT64_MAX - 10);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  auto huge = cache->Acquire(uint64_t{1} << 60);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("mmap"), std::string::npos)
      << huge.status().ToString();
}

}  // namespace
}  // namespace weightlift::internal
