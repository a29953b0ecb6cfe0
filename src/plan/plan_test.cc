#include "plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace weightlift::internal {
namespace {

// Destinations are fake addresses in [kBase, kBase + arena); kBase is
// 2 MiB aligned so that dst % alignment is the arena offset's.
constexpr uintptr_t kBase = uintptr_t{1} << 40;

uint8_t FileByte(uint32_t file, uint64_t off) {
  uint64_t x =
      (off + 1) * 0x9E3779B97F4A7C15ull ^ (file + 7) * 0xBF58476D1CE4E5B9ull;
  return static_cast<uint8_t>(x >> 56);
}

struct Check {
  uint64_t arena = 0;
  std::vector<uint8_t> dst;   // simulated destination bytes
  std::vector<uint8_t> hits;  // times each destination byte was written
};

// Runs PLAN against simulated files and checks every invariant MakePlan
// promises. Returns the simulated destination for content checks.
void VerifyPlan(const Plan& plan, std::span<const Segment> segs,
                std::span<const PlanFile> files, size_t num_tensors,
                const PlanOptions& opt, uint64_t arena,
                bool segments_share_file_bytes = false) {
  Check c;
  c.dst.assign(arena, 0);
  c.hits.assign(arena, 0);
  std::vector<uint32_t> pieces(num_tensors, 0);
  uint64_t bytes_read = 0;
  // Reads of each aligned block, to check shared edge blocks are read once.
  std::vector<std::vector<uint8_t>> block_reads(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    block_reads[f].assign(
        files[f].size / std::max<uint64_t>(files[f].alignment, 1) + 1, 0);
  }
  const ReadChunk* prev = nullptr;
  for (const ReadChunk& ch : plan.chunks) {
    ASSERT_LT(ch.file, files.size());
    const PlanFile& f = files[ch.file];
    const uint64_t a = std::max<uint64_t>(f.alignment, 1);
    if (prev != nullptr) {  // sorted by (file, offset)
      ASSERT_TRUE(prev->file < ch.file ||
                  (prev->file == ch.file && prev->offset <= ch.offset));
    }
    prev = &ch;
    ASSERT_GT(ch.length, 0u);
    ASSERT_EQ(ch.offset % a, 0u) << "unaligned read offset";
    ASSERT_LE(ch.offset + ch.length, f.size) << "read past EOF";
    ASSERT_TRUE(ch.length % a == 0 || ch.offset + ch.length == f.size)
        << "unaligned read length " << ch.length;
    const uint64_t cap = std::max(a, opt.chunk_bytes / a * a);
    ASSERT_LE(ch.length, cap);
    bytes_read += ch.length;
    for (uint64_t b = ch.offset / a; b * a < ch.offset + ch.length; ++b) {
      ++block_reads[ch.file][b];
    }
    ASSERT_FALSE(ch.scatters.empty());
    if (ch.is_direct()) {
      ASSERT_TRUE(f.allow_direct);
      ASSERT_EQ(ch.direct_dst % a, 0u) << "direct destination unaligned";
      // The pieces tile the read, back to back from the destination.
      uint64_t at = 0;
      for (const Scatter& s : ch.scatters) {
        ASSERT_EQ(s.rows, 1u);
        ASSERT_EQ(s.chunk_offset, at);
        ASSERT_EQ(s.dst, ch.direct_dst + at);
        at += s.length;
      }
      ASSERT_EQ(at, ch.length);
    } else {
      ASSERT_LE((ch.length + a - 1) / a * a, plan.max_bounce_bytes);
    }
    for (const Scatter& s : ch.scatters) {
      ASSERT_GT(s.length, 0u);
      ASSERT_GE(s.rows, 1u);
      ASSERT_LE(s.chunk_offset + (s.rows - 1) * s.src_pitch + s.length,
                ch.length);
      ASSERT_GE(s.dst, kBase);
      ASSERT_LE(s.dst - kBase + s.bytes(), arena);
      ASSERT_LT(s.tensor, num_tensors);
      ++pieces[s.tensor];
      for (uint64_t r = 0; r < s.rows; ++r) {
        for (uint64_t i = 0; i < s.length; ++i) {
          const uint64_t d = s.dst - kBase + r * s.length + i;
          c.dst[d] = FileByte(ch.file,
                              ch.offset + s.chunk_offset + r * s.src_pitch + i);
          ++c.hits[d];
        }
      }
    }
  }
  EXPECT_EQ(pieces, plan.pieces_per_tensor);
  EXPECT_EQ(bytes_read, plan.bytes_read);
  uint64_t delivered = 0;
  std::vector<uint8_t> covered(arena, 0);
  for (const Segment& s : segs) {
    delivered += s.bytes();
    for (uint64_t r = 0; r < s.rows; ++r) {
      for (uint64_t i = 0; i < s.length; ++i) {
        const uint64_t d = s.dst - kBase + r * s.length + i;
        ASSERT_EQ(c.hits[d], 1)
            << "byte " << i << " of row " << r << " of segment at file offset "
            << s.file_offset << " delivered " << int(c.hits[d]) << " times";
        ASSERT_EQ(c.dst[d], FileByte(s.file, s.file_offset + r * s.pitch + i));
        covered[d] = 1;
      }
    }
    if (s.bytes() > 0) {
      EXPECT_GT(plan.pieces_per_tensor[s.tensor], 0u);
    }
  }
  EXPECT_EQ(delivered, plan.bytes_delivered);
  for (uint64_t d = 0; d < arena; ++d) {
    if (!covered[d]) {
      ASSERT_EQ(c.hits[d], 0) << "stray write at " << d;
    }
  }
  // Strided chunks may both read a block where one chunk's last row and the
  // next one's first row meet.
  const bool any_strided = std::any_of(
      segs.begin(), segs.end(), [](const Segment& s) { return s.rows > 1; });
  if (!segments_share_file_bytes && !any_strided) {
    for (size_t f = 0; f < files.size(); ++f) {
      for (size_t b = 0; b < block_reads[f].size(); ++b) {
        ASSERT_LE(block_reads[f][b], 1)
            << "block " << b << " of file " << f << " read more than once";
      }
    }
  }
}

PlanOptions Opts(uint64_t chunk, uint64_t direct_min) {
  PlanOptions o;
  o.chunk_bytes = chunk;
  o.direct_min_bytes = direct_min;
  return o;
}

TEST(PlanTest, EmptyRequest) {
  std::vector<PlanFile> files = {{1000, 4096, true}};
  Plan p = MakePlan({}, files, 0, {});
  EXPECT_TRUE(p.chunks.empty());
  EXPECT_EQ(p.bytes_read, 0u);
}

TEST(PlanTest, AlignedTensorGoesDirectInChunks) {
  std::vector<PlanFile> files = {{4096 * 100, 4096, true}};
  std::vector<Segment> segs = {{0, 4096, 4096 * 50, kBase + 4096, 0}};
  Plan p = MakePlan(segs, files, 1, Opts(4096 * 16, 4096));
  ASSERT_EQ(p.chunks.size(), 4u);  // 16 + 16 + 16 + 2 blocks
  for (const auto& c : p.chunks) EXPECT_TRUE(c.is_direct());
  EXPECT_EQ(p.bytes_read, 4096u * 50);
  EXPECT_EQ(p.max_bounce_bytes, 0u);
  VerifyPlan(p, segs, files, 1, Opts(4096 * 16, 4096), 4096 * 60);
}

TEST(PlanTest, EdgesBounceInteriorDirect) {
  // Tensor at file offset 100..100+3*4096+50, destination congruent.
  std::vector<PlanFile> files = {{4096 * 10, 4096, true}};
  const uint64_t len = 3 * 4096 + 50;
  std::vector<Segment> segs = {{0, 100, len, kBase + 100, 0}};
  Plan p = MakePlan(segs, files, 1, Opts(1 << 20, 1));
  int direct = 0, bounce = 0;
  for (const auto& c : p.chunks) (c.is_direct() ? direct : bounce)++;
  EXPECT_EQ(direct, 1);  // blocks 1..2
  EXPECT_EQ(bounce, 2);  // head block 0 and tail block 3
  EXPECT_EQ(p.pieces_per_tensor[0], 3u);
  VerifyPlan(p, segs, files, 1, Opts(1 << 20, 1), 4096 * 5);
}

TEST(PlanTest, MisalignedDestinationBouncesEverything) {
  std::vector<PlanFile> files = {{4096 * 10, 4096, true}};
  std::vector<Segment> segs = {{0, 0, 4096 * 8, kBase + 64, 0}};
  Plan p = MakePlan(segs, files, 1, Opts(4096 * 3, 1));
  for (const auto& c : p.chunks) EXPECT_FALSE(c.is_direct());
  EXPECT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.max_bounce_bytes, 4096u * 3);
  VerifyPlan(p, segs, files, 1, Opts(4096 * 3, 1), 4096 * 9);
}

TEST(PlanTest, SharedEdgeBlockReadOnce) {
  // Two tensors meeting mid-block at 5000; both large and congruent, but
  // apart in the destination (so not one run).
  std::vector<PlanFile> files = {{4096 * 8, 4096, true}};
  std::vector<Segment> segs = {
      {0, 8, 5000 - 8, kBase + 8, 0},
      {0, 5000, 4096 * 8 - 5000, kBase + 4096 * 9 + 5000 % 4096, 1},
  };
  Plan p = MakePlan(segs, files, 2, Opts(1 << 20, 1));
  VerifyPlan(p, segs, files, 2, Opts(1 << 20, 1), 4096 * 17);
  // Block 1 (4096..8192) holds the end of t0 and the start of t1: one chunk
  // with two scatters.
  int shared = 0;
  for (const auto& c : p.chunks) {
    if (!c.is_direct() && c.offset <= 5000 && 5000 < c.offset + c.length) {
      ++shared;
      EXPECT_EQ(c.scatters.size(), 2u);
    }
  }
  EXPECT_EQ(shared, 1);
}

TEST(PlanTest, FileLayoutIsOneDirectRun) {
  // A file's tensors laid out as in the file, congruent modulo 4096: every
  // block is read straight into the destination except the head and tail
  // blocks, whatever the tensor boundaries.
  const uint64_t size = 4096 * 40 + 100;
  std::vector<PlanFile> files = {{size, 4096, true}};
  std::vector<Segment> segs;
  uint64_t off = 8 + 120;  // header, then tensors at 8 mod 64
  uint32_t t = 0;
  for (uint64_t len : {24u, 5000u, 30000u, 8u, 70000u, 16u}) {
    segs.push_back({0, off, len, kBase + off, t++});
    off += len;
  }
  segs.push_back({0, off, size - off, kBase + off, t++});
  Plan p = MakePlan(segs, files, t, Opts(4096 * 8, 4096));
  VerifyPlan(p, segs, files, t, Opts(4096 * 8, 4096), size);
  uint64_t bounced = 0;
  for (const auto& c : p.chunks) {
    if (!c.is_direct()) bounced += c.length;
  }
  EXPECT_EQ(bounced, 4096u + 100u);  // the first block and the tail
  EXPECT_EQ(p.bytes_read, size);
}

TEST(PlanTest, StridedSegmentChunksHoldWholeRows) {
  // 100 rows of 300 bytes, 1000 apart, from offset 777: chunks of at most
  // 8192 aligned bytes, each one strided scatter.
  std::vector<PlanFile> files = {{200000, 4096, true}};
  Segment s{0, 777, 300, kBase, 0};
  s.rows = 100;
  s.pitch = 1000;
  std::vector<Segment> segs = {s};
  Plan p = MakePlan(segs, files, 1, Opts(8192, 1));
  VerifyPlan(p, segs, files, 1, Opts(8192, 1), 30000);
  uint64_t rows = 0;
  for (const auto& c : p.chunks) {
    EXPECT_FALSE(c.is_direct());
    ASSERT_EQ(c.scatters.size(), 1u);
    EXPECT_EQ(c.scatters[0].src_pitch, 1000u);
    rows += c.scatters[0].rows;
  }
  EXPECT_EQ(rows, 100u);
  EXPECT_EQ(p.pieces_per_tensor[0], p.chunks.size());
  EXPECT_LE(p.chunks.size(), 100u * 1000 / 4096 + 2);
}

TEST(PlanTest, GatherSegmentReadsOnlyItsRunsPackedPerChunk) {
  // 100 runs of 300 bytes, 1000 apart: staged (no direct) chunks of at
  // most 8192 bytes = 27 whole runs each, read run by run, one scatter each.
  std::vector<PlanFile> files = {{200000, 1, false}};
  Segment s{0, 777, 300, kBase, 0};
  s.rows = 100;
  s.pitch = 1000;
  s.gather = true;
  std::vector<Segment> segs = {s};
  Plan p = MakePlan(segs, files, 1, Opts(8192, 1));
  ASSERT_EQ(p.chunks.size(), 4u);  // 27 + 27 + 27 + 19 runs
  uint64_t rows = 0;
  for (const auto& c : p.chunks) {
    EXPECT_FALSE(c.is_direct());
    EXPECT_EQ(c.offset, 777 + rows * 1000);
    EXPECT_EQ(c.length, c.rows * 300);
    EXPECT_LE(c.length, 8192u);
    ASSERT_EQ(c.scatters.size(), 1u);
    EXPECT_EQ(c.scatters[0].dst, kBase + rows * 300);
    EXPECT_EQ(c.scatters[0].length, c.length);
    rows += c.rows;
  }
  EXPECT_EQ(rows, 100u);
  EXPECT_EQ(p.bytes_read, 30000u);  // only the selected bytes
  EXPECT_EQ(p.bytes_delivered, 30000u);
  EXPECT_EQ(p.pieces_per_tensor[0], 4u);
  // Where direct reads are allowed (the host) they land in place.
  files[0].allow_direct = true;
  Plan d = MakePlan(segs, files, 1, Opts(8192, 1));
  ASSERT_EQ(d.chunks.size(), 4u);
  for (const auto& c : d.chunks) EXPECT_EQ(c.direct_dst, c.scatters[0].dst);
  // Under O_DIRECT the runs are planned as plain aligned ranges instead.
  files[0].alignment = 4096;
  Plan a = MakePlan(segs, files, 1, Opts(8192, 1));
  VerifyPlan(a, segs, files, 1, Opts(8192, 1), 30000);
  for (const auto& c : a.chunks) EXPECT_EQ(c.rows, 1u);
}

TEST(PlanTest, ChunkBytesSpreadSmallLoadsOverTheWorkers) {
  // A 22 MB slice on 16 workers: ~700 KB chunks, aligned down to 4096.
  EXPECT_EQ(ChunkBytesFor(22544384, 16, 8u << 20, 256u << 10, 4096),
            22544384 / 32 / 4096 * 4096);
  // A 13 GB load keeps the full slot; a tiny one the floor.
  EXPECT_EQ(ChunkBytesFor(13ull << 30, 16, 8u << 20, 256u << 10, 4096),
            8u << 20);
  EXPECT_EQ(ChunkBytesFor(4096, 16, 8u << 20, 256u << 10, 4096), 256u << 10);
  // Never below one alignment block, never zero workers.
  EXPECT_EQ(ChunkBytesFor(1, 0, 8u << 20, 1, 4096), 4096u);
}

TEST(PlanTest, SpreadWakesOnlyTheWorkersASmallLoadKeepsBusy) {
  // The 22.5 MB slice: 8 of 16 workers, two ~1.4 MB chunks each.
  Spread s =
      SpreadFor(22544384, 16, 4u << 20, kMinChunkBytes, 4096, kMinWorkerBytes);
  EXPECT_EQ(s.workers, 8);
  EXPECT_EQ(s.chunk_bytes, 22544384 / 16 / 4096 * 4096);
  // From 40 MB on every worker, chunks as ChunkBytesFor gives them.
  s = SpreadFor(40u << 20, 16, 4u << 20, kMinChunkBytes, 4096, kMinWorkerBytes);
  EXPECT_EQ(s.workers, 16);
  EXPECT_EQ(s.chunk_bytes,
            ChunkBytesFor(40u << 20, 16, 4u << 20, kMinChunkBytes, 4096));
  s = SpreadFor(13ull << 30, 16, 4u << 20, kMinChunkBytes, 4096,
                kMinWorkerBytes);
  EXPECT_EQ(s.workers, 16);
  EXPECT_EQ(s.chunk_bytes, 4u << 20);
  // A tiny load: one worker, the floor; never fewer than one worker, never
  // more than asked for; no minimum: every worker.
  s = SpreadFor(4096, 16, 4u << 20, kMinChunkBytes, 4096, kMinWorkerBytes);
  EXPECT_EQ(s.workers, 1);
  EXPECT_EQ(s.chunk_bytes, kMinChunkBytes);
  EXPECT_EQ(SpreadFor(0, 0, 4u << 20, 1, 4096, kMinWorkerBytes).workers, 1);
  EXPECT_EQ(SpreadFor(1ull << 30, 4, 4u << 20, 1, 4096, 1).workers, 4);
  EXPECT_EQ(SpreadFor(22544384, 16, 4u << 20, 1, 4096, 0).workers, 16);
}

TEST(PlanTest, SmallTensorsCoalesce) {
  std::vector<PlanFile> files = {{1000, 4096, true}};
  std::vector<Segment> segs;
  for (uint32_t i = 0; i < 10; ++i) {
    segs.push_back({0, 8 + i * 99, 99, kBase + i * 128, i});
  }
  Plan p = MakePlan(segs, files, 10, Opts(1 << 20, 1 << 20));
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].offset, 0u);
  EXPECT_EQ(p.chunks[0].length, 1000u);  // ends at EOF, not aligned up
  EXPECT_EQ(p.chunks[0].scatters.size(), 10u);
  EXPECT_EQ(p.max_bounce_bytes, 4096u);
  VerifyPlan(p, segs, files, 10, Opts(1 << 20, 1 << 20), 2048);
}

TEST(PlanTest, TailAtEndOfFileNotAlignedUp) {
  const uint64_t size = 4096 * 3 + 17;
  std::vector<PlanFile> files = {{size, 4096, true}};
  std::vector<Segment> segs = {{0, 0, size, kBase, 0}};
  Plan p = MakePlan(segs, files, 1, Opts(1 << 20, 1));
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_TRUE(p.chunks[0].is_direct());
  EXPECT_EQ(p.chunks[1].offset, 4096u * 3);
  EXPECT_EQ(p.chunks[1].length, 17u);
  VerifyPlan(p, segs, files, 1, Opts(1 << 20, 1), size);
}

TEST(PlanTest, BufferedFileIsAllDirect) {
  std::vector<PlanFile> files = {{10000, 1, true}};
  std::vector<Segment> segs = {{0, 13, 5000, kBase + 1, 0},
                               {0, 5013, 4000, kBase + 9000, 1}};
  Plan p = MakePlan(segs, files, 2, Opts(1 << 20, 1));
  for (const auto& c : p.chunks) EXPECT_TRUE(c.is_direct());
  EXPECT_EQ(p.bytes_read, 9000u);
  VerifyPlan(p, segs, files, 2, Opts(1 << 20, 1), 14000);
}

TEST(PlanTest, DirectNotAllowedBouncesEverything) {
  std::vector<PlanFile> files = {{4096 * 4, 4096, false}};
  std::vector<Segment> segs = {{0, 0, 4096 * 4, kBase, 0}};
  Plan p = MakePlan(segs, files, 1, Opts(4096 * 2, 1));
  ASSERT_EQ(p.chunks.size(), 2u);
  for (const auto& c : p.chunks) EXPECT_FALSE(c.is_direct());
  VerifyPlan(p, segs, files, 1, Opts(4096 * 2, 1), 4096 * 4);
}

TEST(PlanTest, ZeroLengthSegmentsHaveNoPieces) {
  std::vector<PlanFile> files = {{100, 4096, true}};
  std::vector<Segment> segs = {{0, 50, 0, kBase, 0},
                               {0, 50, 50, kBase + 64, 1}};
  Plan p = MakePlan(segs, files, 2, Opts(1 << 20, 1));
  EXPECT_EQ(p.pieces_per_tensor[0], 0u);
  EXPECT_EQ(p.pieces_per_tensor[1], 1u);
  VerifyPlan(p, segs, files, 2, Opts(1 << 20, 1), 200);
}

TEST(PlanTest, SegmentsSharingFileBytes) {
  // The same file range to two destinations (e.g. a tensor loaded twice).
  std::vector<PlanFile> files = {{4096 * 4, 4096, true}};
  std::vector<Segment> segs = {{0, 100, 9000, kBase + 100, 0},
                               {0, 100, 9000, kBase + 10000, 1}};
  Plan p = MakePlan(segs, files, 2, Opts(1 << 20, 1));
  VerifyPlan(p, segs, files, 2, Opts(1 << 20, 1), 20000, true);
}

// Random checkpoints: several files of back-to-back tensors (the safetensors
// layout), a random subset requested, destinations laid out either
// congruent to the file offset, 64-aligned, or at random addresses.
void RandomCase(uint32_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  const uint64_t aligns[] = {1, 512, 4096};
  const uint32_t nfiles = static_cast<uint32_t>(uni(1, 3));
  std::vector<PlanFile> files;
  std::vector<Segment> segs;
  uint64_t arena = 0;
  uint32_t tensor = 0;
  const int dst_mode = static_cast<int>(uni(0, 2));
  const PlanOptions opt =
      Opts(uni(0, 1) ? uni(1, 40000) : (uint64_t{1} << uni(12, 17)),
           uni(0, 1) ? 1 : uni(1, 30000));
  for (uint32_t f = 0; f < nfiles; ++f) {
    PlanFile pf;
    pf.alignment = aligns[uni(0, 2)];
    pf.allow_direct = uni(0, 4) != 0;
    uint64_t off = uni(8, 20000);  // header
    const int nt = static_cast<int>(uni(1, 40));
    for (int t = 0; t < nt; ++t) {
      const int kind = static_cast<int>(uni(0, 3));
      const uint64_t len = kind == 0   ? uni(0, 16)
                           : kind == 1 ? uni(1, 5000)
                                       : uni(4000, 70000);
      if (uni(0, 3) != 0) {  // requested
        uint64_t dst;
        if (dst_mode == 0) {
          arena = (arena + 4095) / 4096 * 4096 + off % 4096;
          dst = arena;
        } else if (dst_mode == 1) {
          arena = (arena + 63) / 64 * 64;
          dst = arena;
        } else {
          arena += uni(0, 300);
          dst = arena;
        }
        Segment seg{f, off, len, kBase + dst, tensor++};
        // Some large tensors are requested as a strided slice: rows of
        // WIDTH bytes, PITCH apart, where a row fits a chunk.
        const uint64_t cap = std::max(
            pf.alignment, opt.chunk_bytes / pf.alignment * pf.alignment);
        if (kind == 2 && uni(0, 2) == 0) {
          const uint64_t rows = uni(2, 30);
          const uint64_t pitch = len / rows;
          const uint64_t width = uni(1, pitch - 1);
          if ((width + pf.alignment - 1) / pf.alignment * pf.alignment +
                  pf.alignment <=
              cap) {
            seg.length = width;
            seg.rows = rows;
            seg.pitch = pitch;
          }
        }
        arena += seg.bytes();
        segs.push_back(seg);
      }
      off += len;
    }
    pf.size = off;
    files.push_back(pf);
  }
  // Sometimes more ranges that share file bytes with the others (slices of
  // one tensor requested twice), to fresh destinations.
  const bool share = uni(0, 2) == 0;
  for (int extra = share ? static_cast<int>(uni(1, 6)) : 0; extra > 0;
       --extra) {
    const uint32_t f = static_cast<uint32_t>(uni(0, nfiles - 1));
    const uint64_t a = uni(0, files[f].size - 1);
    const uint64_t len = uni(1, std::min<uint64_t>(files[f].size - a, 90000));
    arena = (arena + 4095) / 4096 * 4096 + (dst_mode == 0 ? a % 4096 : 0);
    segs.push_back({f, a, len, kBase + arena, tensor++});
    arena += len;
  }
  std::shuffle(segs.begin(), segs.end(), rng);
  Plan p = MakePlan(segs, files, tensor, opt);
  SCOPED_TRACE("seed " + std::to_string(seed));
  VerifyPlan(p, segs, files, tensor, opt, arena + 1, share);
}

TEST(PlanTest, RandomPropertyManySeeds) {
  for (uint32_t seed = 1; seed <= 600; ++seed) {
    RandomCase(seed);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace weightlift::internal
