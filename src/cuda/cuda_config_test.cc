// ResolveCudaConfig: the CUDA loader's sizes from LoadOptions (no GPU).
#include "cuda/cuda_config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace weightlift::internal {
namespace {

LoadOptions Cuda() {
  LoadOptions o;
  o.device = Device::Cuda(0);
  return o;
}

TEST(CudaConfig, DefaultsAre4MiBSlotsTwoPerThreadUpTo16Threads) {
  auto c = ResolveCudaConfig(Cuda(), 64);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->threads, 16);
  EXPECT_EQ(c->slot_bytes, 4u << 20);
  EXPECT_EQ(c->slots_per_thread, 2);  // 128 MiB / 4 MiB / 16
  EXPECT_EQ(c->piece_bytes, 256u << 20);
  EXPECT_EQ(c->streams, 16);
  EXPECT_EQ(c->ring_bytes(), 128ull << 20);
  EXPECT_TRUE(c->notes.empty());
}

TEST(CudaConfig, FewHardwareThreadsAndUnknownCount) {
  auto c = ResolveCudaConfig(Cuda(), 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->threads, 3);  // a core left to the caller
  EXPECT_EQ(c->slots_per_thread, 10);
  auto u = ResolveCudaConfig(Cuda(), 0);  // unknown: 8 cores
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->threads, 6);
}

// The H200 host's 16 cores, one process: 12 workers, and the ring is their
// 2 slots each (96 MiB), the shape the session 10 sweep measured.
TEST(CudaConfig, SixteenCoresAloneMakeTwelveWorkersAndA96MiBRing) {
  auto c = ResolveCudaConfig(Cuda(), 16);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->threads, 12);
  EXPECT_EQ(c->slots_per_thread, 2);
  EXPECT_EQ(c->ring_bytes(), 96ull << 20);
  EXPECT_TRUE(c->notes.empty());
}

// Tensor-parallel ranks on one host (local_world_size) share its cores:
// the automatic count is this process's share, and the report says so.
TEST(CudaConfig, CoLocatedRanksShareTheCoresWithANote) {
  LoadOptions o = Cuda();
  o.local_world_size = 8;
  auto c = ResolveCudaConfig(o, 16);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->threads, 2);
  // One copy stream: ranks sharing a GPU end together (session 26).
  EXPECT_EQ(c->streams, 1);
  // The staging budget is shared too: 2 slots per thread, as one process.
  EXPECT_EQ(c->slots_per_thread, 2);
  EXPECT_EQ(c->ring_bytes(), 16ull << 20);  // 128 MiB / 8
  ASSERT_EQ(c->notes.size(), 3u);
  EXPECT_NE(c->notes[0].find("threads: 2, this process's share of 16 cores "
                             "shared by 8 processes"),
            std::string::npos)
      << c->notes[0];
  EXPECT_NE(c->notes[1].find("staging: a ring of 16.00 MiB, this process's "
                             "share of staging_bytes 128.00 MiB shared by 8"),
            std::string::npos)
      << c->notes[1];
  EXPECT_NE(c->notes[2].find("copy streams: 1, as 8 processes load on this "
                             "host at once"),
            std::string::npos)
      << c->notes[2];
  o.threads = 6;       // asked for: no sharing of cores; a ring of 2 per thread
  o.copy_streams = 3;  // asked for: as many as asked
  c = ResolveCudaConfig(o, 16);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->threads, 6);
  EXPECT_EQ(c->streams, 3);
  EXPECT_EQ(c->slots_per_thread, 2);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_EQ(c->notes[0].find("threads"), std::string::npos) << c->notes[0];
  o.local_world_size = 1;  // alone: the whole budget, a stream per worker
  o.threads = 0;
  o.copy_streams = 0;
  c = ResolveCudaConfig(o, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ring_bytes(), 128ull << 20);
  EXPECT_EQ(c->streams, c->threads);
  EXPECT_TRUE(c->notes.empty());
}

TEST(CudaConfig, ChunkAndPieceRoundUpToPages) {
  LoadOptions o = Cuda();
  o.cuda_chunk_bytes = (1u << 20) + 1;
  o.host_register_piece_bytes = 5000;
  o.threads = 2;
  auto c = ResolveCudaConfig(o, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->slot_bytes, (1u << 20) + 4096);
  EXPECT_EQ(c->piece_bytes, 8192u);
  EXPECT_EQ(c->slot_bytes % kPageBytes, 0u);
}

TEST(CudaConfig, SmallRingLowersThreadsWithANote) {
  LoadOptions o = Cuda();
  o.threads = 16;
  o.cuda_chunk_bytes = 8u << 20;
  o.staging_bytes = 48u << 20;  // 6 slots: 3 threads
  auto c = ResolveCudaConfig(o, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->slots_per_thread, 2);
  ASSERT_EQ(c->notes.size(), 1u);
  EXPECT_NE(c->notes[0].find("using 3 threads instead of 16"),
            std::string::npos)
      << c->notes[0];
}

TEST(CudaConfig, CopyStreamsCappedByThreads) {
  LoadOptions o = Cuda();
  o.threads = 4;
  o.copy_streams = 2;
  auto c = ResolveCudaConfig(o, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->streams, 2);
  o.copy_streams = 99;
  c = ResolveCudaConfig(o, 64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->streams, 4);
}

TEST(CudaConfig, BadSizesAreInvalidArgumentNamingTheOption) {
  LoadOptions o = Cuda();
  o.cuda_chunk_bytes = 4096;
  auto c = ResolveCudaConfig(o, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("65536"), std::string::npos);

  o = Cuda();
  o.cuda_chunk_bytes = 64u << 20;
  o.staging_bytes = 100u << 20;  // one slot
  c = ResolveCudaConfig(o, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("fewer than 2 staging slots"),
            std::string::npos);
}

// Unvalidated options (CreateCudaLoader called directly) used to wrap the
// page round-up to 0: a division by zero, or 4 KiB host-register pieces.
TEST(CudaConfig, HugeSizesDoNotWrap) {
  LoadOptions o = Cuda();
  o.cuda_chunk_bytes = std::numeric_limits<size_t>::max();
  auto c = ResolveCudaConfig(o, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cuda_chunk_bytes"), std::string::npos);

  o = Cuda();
  o.host_register_piece_bytes = std::numeric_limits<size_t>::max() - 10;
  c = ResolveCudaConfig(o, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("host_register_piece_bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace weightlift::internal
