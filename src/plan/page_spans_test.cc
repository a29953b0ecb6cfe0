#include "plan/page_spans.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "plan/plan.h"
#include "plan/testing/tensors.h"

namespace weightlift::internal {
namespace {

constexpr uint64_t kPage = 4096;

TensorSelection Block(uint32_t file, uint64_t offset, uint64_t width,
                      uint64_t rows = 1, uint64_t pitch = 0) {
  TensorSelection s;
  s.file = file;
  s.blocks.push_back({offset, width, rows, pitch});
  s.bytes = width * rows;
  return s;
}

TEST(PageSpansTest, WidensToPagesMergesTouchingAndCutsAtTheLastPage) {
  std::vector<TensorSelection> sels = {
      Block(0, 100, 50),                  // page 0
      Block(0, 4096 * 3 + 10, 4096),      // pages 3-4
      Block(0, 4096 * 5, 8),              // page 5: touches 3-4
      Block(0, 4096 * 9, 1024, 4, 8192),  // rows of pages 9..15
      Block(1, 20000, 1000),              // file 1, up to its end
  };
  std::vector<uint64_t> sizes = {1 << 20, 21000};
  auto spans = PageSpansOf(sels, sizes, kPage);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0],
            (std::vector<PageSpan>{
                {0, 4096}, {4096 * 3, 4096 * 6}, {4096 * 9, 4096 * 16}}));
  EXPECT_EQ(spans[1], (std::vector<PageSpan>{{16384, 24576}}));
  EXPECT_TRUE(SpansCover(spans[0], 4096 * 3, 4096 * 3));
  EXPECT_FALSE(SpansCover(spans[0], 4096 * 3, 4096 * 3 + 1));
  EXPECT_FALSE(SpansCover(spans[0], 4096, 1));
  EXPECT_TRUE(SpansCover(spans[0], 4096 * 15, 4096));
  EXPECT_FALSE(SpansCover(spans[1], 0, 1));
  EXPECT_EQ(SpanBytes(spans[0]), 4096u * 11);
  // The selections they were made from are held; a block over page 2 is
  // not; blocks of another file do not count.
  EXPECT_TRUE(SpansHold(spans[0], 0, sels));
  EXPECT_TRUE(SpansHold(spans[1], 1, sels));
  std::vector<TensorSelection> over = {Block(0, 4096 * 2 - 1, 2)};
  EXPECT_FALSE(SpansHold(spans[0], 0, over));
  EXPECT_TRUE(SpansHold(spans[0], 1, over));
}

// The default rule registers a rank's column-parallel and replicated parts
// and leaves every row-parallel part to staging, from n = 2 on: a half of
// each row of a Llama down_proj lies in pages twice its bytes. A small
// tensor's edge pages are allowed; forced (no limit) keeps everything.
TEST(PageSpansTest, SplitByPageCostStagesRowParallelPartsFromTwoRanks) {
  constexpr uint64_t kRow = 11008 * 2;  // down_proj: 4096 rows of bf16
  const uint64_t down = 8 * kPage, norm = down + 4096 * kRow + 100;
  std::vector<TensorSelection> sels = {
      Block(0, down, kRow / 2, 4096, kRow),  // row-parallel, rank 0 of 2
      Block(0, down + kRow / 2, kRow / 2, 4096, kRow),  // rank 1 of 2
      Block(0, down, 2048 * kRow),                      // column-parallel half
      Block(0, norm, 4096 * 4),                         // replicated, unaligned
      Block(0, norm + 4096 * 4 + 10, 6),     // 6 bytes over two pages
      Block(0, down, kRow / 4, 4096, kRow),  // row-parallel, n = 4
  };
  sels.push_back(Block(0, 0, 0));  // selects nothing: neither kept nor left
  std::vector<uint64_t> sizes = {norm + (1 << 20)};
  PageCostSplit split =
      SplitByPageCost(sels, sizes, kPage, kMaxRegisteredPerSelected);
  ASSERT_EQ(split.worth.size(), 3u);
  EXPECT_EQ(split.worth[0].blocks[0].file_offset, down);
  EXPECT_EQ(split.worth[0].bytes, 2048 * kRow);
  EXPECT_EQ(split.worth[1].blocks[0].file_offset, norm);
  EXPECT_EQ(split.worth[2].bytes, 6u);
  EXPECT_EQ(split.left_count, 3u);
  EXPECT_EQ(split.left_bytes, 4096 * kRow / 2 * 2 + 4096 * kRow / 4);
  // Each row-parallel part's pages are about its tensor's whole rows.
  EXPECT_GE(split.left_pages, 3 * (4096 * kRow - kRow));
  EXPECT_LE(split.left_pages, 3 * (4096 * kRow + 2 * kPage));

  PageCostSplit all = SplitByPageCost(sels, sizes, kPage,
                                      std::numeric_limits<double>::infinity());
  EXPECT_EQ(all.worth.size(), 6u);
  EXPECT_EQ(all.left_count, 0u);
  EXPECT_EQ(all.left_bytes, 0u);
}

// Random slices of random tensors, planned as the registered route plans
// them (page alignment, strided placement, any chunk size): every chunk
// lies in one of the spans, and the spans never share a page.
TEST(PageSpansTest, EveryPlannedChunkLiesInOneSpan) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<TensorInfo> tensors;
    uint64_t offset = rng() % 5000;
    for (int t = 0; t < 6; ++t) {
      const uint64_t rows = 1 + rng() % 40, cols = 1 + rng() % 3000;
      tensors.push_back(testing::Tensor({rows, cols}, 2, offset));
      offset += tensors.back().size + rng() % 9000;
    }
    const uint64_t file_size = offset + rng() % 100;
    std::vector<TensorSelection> sels;
    std::vector<Segment> segs;
    ReadCounts counts;
    PlaceOptions po{kPage, (1u << 16) + (rng() % 8) * kPage, 0};
    po.covering_is_free = true;
    uintptr_t dst = 1 << 20;
    for (uint32_t k = 0; k < tensors.size(); ++k) {
      const TensorInfo& t = tensors[k];
      const uint64_t cols = t.shape[1];
      const uint64_t a = rng() % cols, b = a + 1 + rng() % (cols - a);
      std::vector<DimSlice> slice = {{0, t.shape[0], 1}, {a, b, 1}};
      auto sel = SelectSlice(t, k, 16, slice);
      ASSERT_TRUE(sel.ok());
      PlaceSelection(*sel, dst, k, po, &segs, &counts);
      dst += sel->bytes;
      sels.push_back(std::move(*sel));
    }
    std::vector<uint64_t> sizes = {file_size};
    auto spans = PageSpansOf(sels, sizes, kPage);
    for (size_t i = 1; i < spans[0].size(); ++i) {
      ASSERT_GT(spans[0][i].begin, spans[0][i - 1].end - 1);
    }
    PlanFile f{file_size, kPage, false};
    PlanOptions popt{po.max_chunk_bytes, UINT64_MAX};
    Plan plan =
        MakePlan(segs, std::span<const PlanFile>(&f, 1), tensors.size(), popt);
    for (const ReadChunk& c : plan.chunks) {
      ASSERT_TRUE(SpansCover(spans[0], c.offset, c.length))
          << "round " << round << " chunk at " << c.offset << " length "
          << c.length;
    }
  }
}

// As a load plans from pages prepare registered only in part (some
// selections left to staging, registration stopped after a prefix of the
// spans; cuda_loader.cc): the selections whose blocks lie in registered
// spans are placed in place and merged with the staged rest's plan. Every
// in-place chunk lies in one registered span, every other chunk is a
// slot's, and the merged plan delivers every selected byte once.
TEST(PageSpansTest, EveryInPlaceChunkLiesInOneRegisteredSpan) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<TensorInfo> tensors;
    uint64_t offset = rng() % 5000;
    for (int t = 0; t < 8; ++t) {
      const uint64_t rows = 1 + rng() % 40, cols = 1 + rng() % 3000;
      tensors.push_back(testing::Tensor({rows, cols}, 2, offset));
      offset += tensors.back().size + rng() % 9000 * (rng() % 2);
    }
    const uint64_t file_size = offset + rng() % 100;
    std::vector<TensorSelection> sels, chosen;
    for (uint32_t k = 0; k < tensors.size(); ++k) {
      const TensorInfo& t = tensors[k];
      std::vector<DimSlice> slice = {{0, t.shape[0], 1}, {0, t.shape[1], 1}};
      const uint64_t d = rng() % 2;  // rows (contiguous) or columns
      const uint64_t a = rng() % t.shape[d];
      slice[d] = {a, a + 1 + rng() % (t.shape[d] - a), 1};
      auto sel = SelectSlice(t, k, 16, slice);
      ASSERT_TRUE(sel.ok());
      if (rng() % 3 != 0) chosen.push_back(*sel);  // the rest left out
      sels.push_back(std::move(*sel));
    }
    std::vector<uint64_t> sizes = {file_size};
    std::vector<PageSpan> spans = PageSpansOf(chosen, sizes, kPage)[0];
    spans.resize(rng() % (spans.size() + 1));  // registration stopped here
    std::vector<Segment> staged, in_place;
    ReadCounts counts;
    const uint64_t slot = (1u << 16) + (rng() % 8) * kPage;
    const uint64_t copy = (1u << 16) + (rng() % 64) * kPage;
    uintptr_t dst = 1 << 20;
    uint64_t total = 0;
    for (uint32_t k = 0; k < sels.size(); ++k) {
      const bool here = SpansHold(spans, 0, std::span(&sels[k], 1));
      PlaceOptions po{here ? kPage : 1, here ? copy : slot, 0};
      po.covering_is_free = here;
      PlaceSelection(sels[k], dst, k, po, here ? &in_place : &staged, &counts);
      dst += sels[k].bytes;
      total += sels[k].bytes;
    }
    PlanFile read{file_size, 1, false}, mapped{file_size, kPage, false};
    Plan plan = MakePlan(staged, std::span(&read, 1), sels.size(),
                         PlanOptions{slot, UINT64_MAX});
    const uint64_t staged_read = plan.bytes_read;
    const uint64_t max_bounce = plan.max_bounce_bytes;
    MergeInPlace(MakePlan(in_place, std::span(&mapped, 1), sels.size(),
                          PlanOptions{copy, UINT64_MAX}),
                 &plan);
    ASSERT_EQ(plan.bytes_delivered, total) << "round " << round;
    uint64_t in_place_bytes = 0;
    for (const Segment& sg : in_place) in_place_bytes += sg.bytes();
    EXPECT_EQ(plan.bytes_read, staged_read + in_place_bytes);
    EXPECT_EQ(plan.max_bounce_bytes, max_bounce);
    std::vector<uint32_t> pieces(sels.size(), 0);
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const ReadChunk& c = plan.chunks[i];
      if (i > 0) {
        ASSERT_LE(plan.chunks[i - 1].offset, c.offset);
      }
      for (const Scatter& sc : c.scatters) ++pieces[sc.tensor];
      if (c.in_place) {
        ASSERT_TRUE(SpansCover(spans, c.offset, c.length))
            << "round " << round << " chunk at " << c.offset << " length "
            << c.length;
      } else {
        ASSERT_LE(c.length, slot) << "round " << round;
      }
    }
    EXPECT_EQ(pieces, plan.pieces_per_tensor) << "round " << round;
  }
}

}  // namespace
}  // namespace weightlift::internal
