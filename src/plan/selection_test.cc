#include "plan/selection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "plan/testing/tensors.h"

namespace weightlift::internal {
namespace {

using testing::Tensor;

// numpy's basic indexing, written the plain way: every selected element in
// C order, gathered from FILE.
std::vector<uint8_t> ReferenceGather(const std::vector<uint8_t>& file,
                                     const TensorInfo& t, int eb,
                                     const std::vector<DimSlice>& slices) {
  const size_t n = t.shape.size();
  std::vector<DimSlice> s(n);
  for (size_t i = 0; i < n; ++i) {
    s[i] = i < slices.size() ? slices[i] : DimSlice{0, t.shape[i], 1};
  }
  std::vector<uint8_t> out;
  for (size_t i = 0; i < n; ++i) {
    if (s[i].count() == 0) return out;
  }
  std::vector<uint64_t> idx(n, 0);
  while (true) {
    uint64_t elem = 0;
    for (size_t i = 0; i < n; ++i) {
      elem = elem * t.shape[i] + s[i].start + idx[i] * s[i].step;
    }
    const uint8_t* p = file.data() + t.offset + elem * eb;
    out.insert(out.end(), p, p + eb);
    size_t d = n;
    while (d > 0 && ++idx[d - 1] == s[d - 1].count()) idx[--d] = 0;
    if (d == 0) break;
  }
  return out;
}

// Runs PLAN against FILE the way the host executor does (direct chunks
// land as they are read; bounce chunks are scattered, strided ones row by
// row) and returns the destination arena.
std::vector<uint8_t> Execute(const Plan& plan, const std::vector<uint8_t>& file,
                             uintptr_t base, uint64_t arena) {
  std::vector<uint8_t> dst(arena, 0xEE);
  for (const ReadChunk& c : plan.chunks) {
    uint64_t len = std::min<uint64_t>(c.length, file.size() - c.offset);
    const uint8_t* read = file.data() + c.offset;
    std::vector<uint8_t> gathered;  // a gather chunk's runs, back to back
    if (c.rows > 1) {
      const uint64_t width = c.length / c.rows;
      EXPECT_EQ(width * c.rows, c.length);
      for (uint64_t r = 0; r < c.rows; ++r) {
        const uint64_t at = c.offset + r * c.pitch;
        EXPECT_LE(at + width, file.size());
        gathered.insert(gathered.end(), file.begin() + at,
                        file.begin() + at + width);
      }
      read = gathered.data();
      len = c.length;
    }
    if (c.is_direct()) {
      std::memcpy(dst.data() + (c.direct_dst - base), read, len);
      continue;
    }
    for (const Scatter& s : c.scatters) {
      for (uint64_t r = 0; r < s.rows; ++r) {
        EXPECT_LE(s.chunk_offset + r * s.src_pitch + s.length, len);
        std::memcpy(dst.data() + (s.dst - base) + r * s.length,
                    read + s.chunk_offset + r * s.src_pitch, s.length);
      }
    }
  }
  return dst;
}

TEST(SelectSliceTest, WholeTensorIsOneBlock) {
  TensorInfo t = Tensor({4, 6}, 2, 104);
  auto sel = SelectSlice(t, 3, 16, {});
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  EXPECT_TRUE(sel->whole);
  EXPECT_EQ(sel->tensor, 3u);
  EXPECT_EQ(sel->bytes, 48u);
  ASSERT_EQ(sel->blocks.size(), 1u);
  EXPECT_EQ(sel->blocks[0].file_offset, 104u);
  // Full slices on every dimension are the whole tensor too.
  std::vector<DimSlice> full = {{0, 4, 1}, {0, 6, 1}};
  EXPECT_TRUE(SelectSlice(t, 3, 16, full)->whole);
}

TEST(SelectSliceTest, RowRangeIsContiguous) {
  TensorInfo t = Tensor({4096, 11008}, 2, 8);
  std::vector<DimSlice> rows = {{1024, 2048, 1}};
  auto sel = SelectSlice(t, 0, 16, rows);
  ASSERT_TRUE(sel.ok());
  EXPECT_FALSE(sel->whole);
  EXPECT_EQ(sel->shape, (std::vector<uint64_t>{1024, 11008}));
  ASSERT_EQ(sel->blocks.size(), 1u);
  EXPECT_EQ(sel->blocks[0].rows, 1u);
  EXPECT_EQ(sel->blocks[0].file_offset, 8u + 1024u * 11008 * 2);
  EXPECT_EQ(sel->blocks[0].width, 1024u * 11008 * 2);
}

TEST(SelectSliceTest, ColumnRangeIsOneStridedBlock) {
  TensorInfo t = Tensor({4096, 11008}, 2, 8);
  std::vector<DimSlice> cols = {{0, 4096, 1}, {2752, 5504, 1}};
  auto sel = SelectSlice(t, 0, 16, cols);
  ASSERT_TRUE(sel.ok());
  ASSERT_EQ(sel->blocks.size(), 1u);
  const RowBlock& b = sel->blocks[0];
  EXPECT_EQ(b.rows, 4096u);
  EXPECT_EQ(b.width, 2752u * 2);
  EXPECT_EQ(b.pitch, 11008u * 2);
  EXPECT_EQ(b.file_offset, 8u + 2752u * 2);
}

TEST(SelectSliceTest, StepsUpToTheLargestCountWithoutWrapping) {
  // range(1, 5, 2**64 - 1) is [1]: a count of ceil(4 / step) that added
  // step - 1 before dividing wrapped to 0 and selected nothing.
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ((DimSlice{1, 5, max}.count()), 1u);
  EXPECT_EQ((DimSlice{0, max, max}.count()), 1u);
  EXPECT_EQ((DimSlice{0, max, 1}.count()), max);
  EXPECT_EQ((DimSlice{0, 7, 3}.count()), 3u);
  EXPECT_EQ((DimSlice{5, 5, 1}.count()), 0u);
  EXPECT_EQ((DimSlice{6, 5, 1}.count()), 0u);
  TensorInfo t = Tensor({8}, 1, 0);
  std::vector<DimSlice> one = {{1, 5, max}};
  auto sel = SelectSlice(t, 0, 8, one);
  ASSERT_TRUE(sel.ok()) << sel.status().ToString();
  EXPECT_EQ(sel->shape, (std::vector<uint64_t>{1}));
  EXPECT_EQ(sel->bytes, 1u);
}

TEST(SelectSliceTest, BadSlicesNameTheTensorAndDimension) {
  TensorInfo t = Tensor({4, 6}, 4, 8);
  std::vector<DimSlice> too_many = {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}};
  auto a = SelectSlice(t, 0, 32, too_many);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("'w'"), std::string::npos);
  std::vector<DimSlice> past = {{0, 4, 1}, {2, 7, 1}};
  auto b = SelectSlice(t, 0, 32, past);
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("dimension 1 (size 6)"),
            std::string::npos)
      << b.status().message();
  std::vector<DimSlice> step0 = {{0, 4, 0}};
  EXPECT_EQ(SelectSlice(t, 0, 32, step0).status().code(),
            StatusCode::kInvalidArgument);
  // Sub-byte dtypes load whole or not at all.
  std::vector<DimSlice> half = {{0, 2, 1}};
  EXPECT_EQ(SelectSlice(Tensor({4, 6}, 1, 8), 0, 4, half).status().code(),
            StatusCode::kUnsupported);
  EXPECT_TRUE(SelectSlice(Tensor({4, 6}, 1, 8), 0, 4, {}).ok());
}

TEST(PlaceSelectionTest, ChoosesFewerBytesAtTheGranularity) {
  // Narrow columns of rows shorter than a block (O_DIRECT): the rows share
  // blocks, so reading row by row moves every block anyway; one covering
  // read per chunk with a strided copy moves the same bytes in one copy.
  TensorInfo t = Tensor({4096, 1024}, 2, 8);
  std::vector<DimSlice> cols = {{0, 4096, 1}, {0, 128, 1}};
  auto sel = SelectSlice(t, 0, 16, cols);
  ASSERT_TRUE(sel.ok());
  const PlaceOptions direct{4096, 8u << 20, 0};
  EXPECT_EQ(StridedCost(sel->blocks[0], direct),
            RowRunsCost(sel->blocks[0], direct));
  std::vector<Segment> segs;
  ReadCounts stats;
  PlaceSelection(*sel, 0x10000, 0, direct, &segs, &stats);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].rows, 4096u);
  EXPECT_EQ(stats.strided_slices, 1u);
  EXPECT_EQ(stats.strided_rows, 4096u);
  // Columns of rows longer than a block: row by row reads fewer blocks.
  TensorInfo wide = Tensor({4096, 11008}, 2, 8);
  std::vector<DimSlice> half = {{0, 4096, 1}, {0, 2752, 1}};
  auto sel2 = SelectSlice(wide, 0, 16, half);
  ASSERT_TRUE(sel2.ok());
  segs.clear();
  ReadCounts stats2;
  PlaceSelection(*sel2, 0x10000, 0, direct, &segs, &stats2);
  // One gather segment: the planner reads its rows one by one.
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_TRUE(segs[0].gather);
  EXPECT_EQ(segs[0].rows, 4096u);
  EXPECT_EQ(stats2.row_run_slices, 1u);
  EXPECT_EQ(stats2.row_run_reads, 4096u);
  EXPECT_LT(stats2.slice_bytes_read, wide.size / 2);
  // Buffered (granularity 1): only the selected bytes move, row by row.
  segs.clear();
  ReadCounts stats3;
  PlaceSelection(*sel, 0x10000, 0, PlaceOptions{1, 8u << 20, 0}, &segs,
                 &stats3);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_TRUE(segs[0].gather);
  EXPECT_EQ(stats3.slice_bytes_read, sel->bytes);
  EXPECT_EQ(stats3.slice_bytes_selected, sel->bytes);
  // Without staging (GDS) a strided copy is impossible: always row runs.
  segs.clear();
  ReadCounts stats4;
  PlaceSelection(*sel, 0x10000, 0, PlaceOptions{4096, 0, 0}, &segs, &stats4);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_TRUE(segs[0].gather);
  EXPECT_EQ(stats4.row_run_slices, 1u);
}

// A tensor-parallel rank's row-parallel part at n = 8: 1 KiB of every 8 KiB
// row. By bytes alone (a read costs nothing more, the page cache) row runs
// win: one 4 KiB block per row against the whole rows. When a read costs
// 32 KiB more (O_DIRECT, kDirectReadCostBytes) the covering read wins, and
// the stats keep what a read was weighed as (for the report's note).
TEST(PlaceSelectionTest, AReadsOwnCostTurnsShortRunsIntoACoveringRead) {
  TensorInfo t = Tensor({4096, 4096}, 2, 8);
  std::vector<DimSlice> part = {{0, 4096, 1}, {512, 1024, 1}};
  auto sel = SelectSlice(t, 0, 16, part);
  ASSERT_TRUE(sel.ok());
  std::vector<Segment> segs;
  ReadCounts bytes_only;
  PlaceSelection(*sel, 0x10000, 0, PlaceOptions{4096, 8u << 20, 0}, &segs,
                 &bytes_only);
  EXPECT_EQ(bytes_only.row_run_slices, 1u);
  EXPECT_EQ(bytes_only.slice_read_cost_bytes, 0u);
  segs.clear();
  ReadCounts weighed;
  PlaceSelection(*sel, 0x10000, 0, PlaceOptions{4096, 8u << 20, 32u << 10},
                 &segs, &weighed);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_FALSE(segs[0].gather);
  EXPECT_EQ(weighed.strided_slices, 1u);
  EXPECT_EQ(weighed.slice_read_cost_bytes, 32u << 10);
}

// From memory registered ahead (covering_is_free) the same part is one
// strided segment that moves only its own bytes: the copy picks 1 KiB of
// each row out of the registered rows, nothing reads the rest. A row wider
// than a chunk still goes row by row.
TEST(PlaceSelectionTest, AFreeCoverPlacesEveryFittingBlockStrided) {
  TensorInfo t = Tensor({4096, 4096}, 2, 8);
  std::vector<DimSlice> part = {{0, 4096, 1}, {512, 1024, 1}};
  auto sel = SelectSlice(t, 0, 16, part);
  ASSERT_TRUE(sel.ok());
  PlaceOptions registered{4096, 64u << 20, 0};
  registered.covering_is_free = true;
  std::vector<Segment> segs;
  ReadCounts counts;
  PlaceSelection(*sel, 0x10000, 0, registered, &segs, &counts);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_FALSE(segs[0].gather);
  EXPECT_EQ(segs[0].rows, 4096u);
  EXPECT_EQ(segs[0].pitch, 8192u);
  EXPECT_EQ(counts.strided_slices, 1u);
  EXPECT_EQ(counts.slice_bytes_read, sel->bytes);
  // A contiguous part (rows 1..3, not page aligned) counts its own bytes.
  std::vector<DimSlice> rows = {{1, 3, 1}};
  auto rows_sel = SelectSlice(t, 0, 16, rows);
  ASSERT_TRUE(rows_sel.ok());
  segs.clear();
  ReadCounts contiguous;
  PlaceSelection(*rows_sel, 0x10000, 0, registered, &segs, &contiguous);
  EXPECT_EQ(contiguous.slice_bytes_read, rows_sel->bytes);
  registered.max_chunk_bytes = 4096;  // a row and a block do not fit
  segs.clear();
  ReadCounts narrow;
  PlaceSelection(*sel, 0x10000, 0, registered, &segs, &narrow);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_TRUE(segs[0].gather);
  EXPECT_EQ(narrow.row_run_slices, 1u);
}

// Random tensors, random slices, every placement: the bytes the plan
// delivers are exactly numpy's gather of the same real random data.
TEST(PlaceSelectionTest, RandomSlicesMatchReferenceGather) {
  std::mt19937_64 rng(20261203);
  auto uni = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  constexpr uintptr_t kBase = uintptr_t{1} << 40;
  for (int iter = 0; iter < 1500; ++iter) {
    const size_t ndim = uni(1, 4);
    std::vector<uint64_t> shape(ndim);
    for (auto& d : shape) d = uni(1, ndim <= 2 ? 300 : 24);
    const int eb = 1 << uni(0, 3);
    const uint64_t offset = 8 + uni(0, 9000);
    TensorInfo t = Tensor(shape, eb, offset);
    std::vector<uint8_t> file(offset + t.size + uni(0, 5000));
    for (auto& b : file) b = static_cast<uint8_t>(rng());
    std::vector<DimSlice> slices(uni(0, ndim));
    for (size_t i = 0; i < slices.size(); ++i) {
      const uint64_t a = uni(0, shape[i]);
      const uint64_t b = uni(a, shape[i]);
      slices[i] = {a, b, uni(0, 2) == 0 ? uni(2, 7) : 1};
      if (uni(0, 5) == 0) slices[i] = {0, shape[i], 1};
    }
    auto sel = SelectSlice(t, 0, eb * 8, slices);
    ASSERT_TRUE(sel.ok()) << sel.status().ToString();
    const std::vector<uint8_t> want = ReferenceGather(file, t, eb, slices);
    ASSERT_EQ(sel->bytes, want.size());
    uint64_t shape_bytes = static_cast<uint64_t>(eb);
    for (uint64_t d : sel->shape) shape_bytes *= d;
    ASSERT_EQ(shape_bytes, want.size());

    const uint64_t aligns[] = {1, 512, 4096};
    PlaceOptions po;
    po.granularity = aligns[uni(0, 2)];
    po.max_chunk_bytes = uni(0, 3) == 0 ? 0 : uni(3, 64) * po.granularity;
    po.read_cost_bytes = uni(0, 1) ? uni(0, 1) << 15 : uni(0, 100);
    std::vector<Segment> segs;
    ReadCounts stats;
    const uint64_t dst_at = uni(0, 8192);
    PlaceSelection(*sel, kBase + dst_at, 0, po, &segs, &stats);
    PlanFile pf{file.size(), po.granularity, uni(0, 1) == 0};
    PlanOptions opt;
    opt.chunk_bytes = po.max_chunk_bytes ? po.max_chunk_bytes : uni(1, 50000);
    opt.direct_min_bytes = uni(0, 1) ? 1 : 4096;
    Plan plan = MakePlan(segs, {&pf, 1}, 1, opt);
    EXPECT_EQ(plan.bytes_delivered, want.size());
    const std::vector<uint8_t> got =
        Execute(plan, file, kBase, dst_at + want.size());
    ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + dst_at))
        << "iteration " << iter << ": " << ndim << " dims, " << segs.size()
        << " segments";
  }
}

// The rows of B read one by one at granularity G, walked the plain way:
// (aligned bytes, reads), rows whose aligned ranges touch being one read.
std::pair<uint64_t, uint64_t> WalkedRuns(const RowBlock& b, uint64_t g) {
  uint64_t bytes = 0, reads = 0, lo = 0, hi = 0;
  for (uint64_t r = 0; r < b.rows; ++r) {
    const uint64_t s = (b.file_offset + r * b.pitch) / g * g;
    const uint64_t e = (b.file_offset + r * b.pitch + b.width + g - 1) / g * g;
    if (reads > 0 && s <= hi) {
      hi = std::max(hi, e);
      continue;
    }
    bytes += hi - lo;
    lo = s;
    hi = e;
    ++reads;
  }
  return {bytes + hi - lo, reads};
}

// RowRunsCost does not walk the rows where they cannot touch; its bytes and
// reads must still be the walk's, for every granularity, phase and pitch,
// around the boundary where rows start to touch.
TEST(PlaceSelectionTest, RowRunsCostIsTheWalksBytesAndReads) {
  std::mt19937_64 rng(13);
  int cases = 0;
  for (const uint64_t g : {1u, 2u, 512u, 4096u, 3000u}) {
    for (int i = 0; i < 400; ++i) {
      RowBlock b;
      b.width = 1 + rng() % (3 * g + 3000);
      // Pitches on both sides of WIDTH + 2G - 1, and far beyond it.
      const uint64_t edge = b.width + 2 * g - 1;
      switch (i % 4) {
        case 0:
          b.pitch = edge - std::min<uint64_t>(edge - b.width, rng() % 4);
          break;
        case 1:
          b.pitch = edge + rng() % 4;
          break;
        case 2:
          b.pitch = b.width + rng() % (4 * g + 1);
          break;
        default:
          b.pitch = edge + rng() % 100000;
          break;
      }
      b.rows = 1 + rng() % (i % 8 == 0 ? 20000 : 300);
      b.file_offset = rng() % (1u << 20);
      const auto [bytes, reads] = WalkedRuns(b, g);
      PlaceOptions o;
      o.granularity = g;
      ASSERT_EQ(RowRunsCost(b, o), bytes)
          << "g " << g << " width " << b.width << " pitch " << b.pitch
          << " rows " << b.rows << " offset " << b.file_offset;
      o.read_cost_bytes = 1;
      ASSERT_EQ(RowRunsCost(b, o), bytes + reads)
          << "g " << g << " width " << b.width << " pitch " << b.pitch
          << " rows " << b.rows << " offset " << b.file_offset;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 2000);
}

// A rank's 1.4 million row runs are costed without walking them, from the
// page cache and under O_DIRECT (where neighbouring runs share pages):
// placing them takes well under a millisecond (walking them took 18 ms on
// the development VM).
TEST(PlaceSelectionTest, PlacingMillionsOfRowRunsDoesNotWalkThem) {
  TensorSelection sel;
  sel.whole = false;
  for (int k = 0; k < 224; ++k) {
    sel.blocks.push_back(RowBlock{uint64_t(k) << 27, 1024, 6144, 8192});
    sel.bytes += 1024 * 6144;
  }
  for (const uint64_t g : {1u, 4096u}) {
    SCOPED_TRACE("granularity " + std::to_string(g));
    PlaceOptions o;
    o.granularity = g;
    std::vector<Segment> segments;
    ReadCounts stats;
    const auto t = std::chrono::steady_clock::now();
    PlaceSelection(sel, 0, 0, o, &segments, &stats);
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t)
                          .count();
    EXPECT_EQ(stats.row_run_slices, 224u);
    const auto [bytes, reads] = WalkedRuns(sel.blocks[0], g);
    EXPECT_EQ(stats.row_run_reads, 224u * reads);
    EXPECT_EQ(stats.slice_bytes_read, 224u * bytes);
    if (g == 1) {
      EXPECT_EQ(stats.slice_bytes_read, sel.bytes);
    }
    EXPECT_LT(ms, 5.0) << "placing 1.4 million row runs took " << ms << " ms";
  }
}

}  // namespace
}  // namespace weightlift::internal
