#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "format/testing/tensor_info.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift {
namespace {

using internal::testing::Tensor;

TensorParallel Tp(int rank, int size, std::vector<TpPlanEntry> plan = {}) {
  TensorParallel tp;
  tp.rank = rank;
  tp.size = size;
  tp.plan = std::move(plan);
  return tp;
}

// The bytes of part R of N along DIM, gathered element by element from the
// row-major tensor bytes (the reference the run geometry must reproduce).
std::vector<uint8_t> ReferencePart(const std::vector<uint8_t>& bytes,
                                   const std::vector<uint64_t>& shape,
                                   size_t elem, size_t dim, uint64_t start,
                                   uint64_t stop) {
  uint64_t outer = 1, inner = 1;
  for (size_t i = 0; i < dim; ++i) outer *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<uint8_t> out;
  for (uint64_t o = 0; o < outer; ++o) {
    for (uint64_t k = start; k < stop; ++k) {
      for (uint64_t i = 0; i < inner; ++i) {
        const uint64_t e = (o * shape[dim] + k) * inner + i;
        out.insert(out.end(), bytes.begin() + e * elem,
                   bytes.begin() + (e + 1) * elem);
      }
    }
  }
  return out;
}

std::vector<uint8_t> FromRuns(const std::vector<uint8_t>& bytes,
                              const TensorShard& s) {
  std::vector<uint8_t> out;
  for (uint64_t r = 0; r < s.runs; ++r) {
    const uint64_t at = s.first_byte + r * s.run_stride;
    out.insert(out.end(), bytes.begin() + at, bytes.begin() + at + s.run_bytes);
  }
  return out;
}

TEST(TensorSplitRange, MatchesTensorSplitSections) {
  // torch.tensor_split: the first len % n parts have len / n + 1 elements.
  for (uint64_t len : {0, 1, 2, 5, 7, 8, 11008, 32001}) {
    for (int n : {1, 2, 3, 4, 5, 8}) {
      uint64_t next = 0;
      for (int r = 0; r < n; ++r) {
        const uint64_t want =
            len / n + (static_cast<uint64_t>(r) < len % n ? 1 : 0);
        SplitRange got = TensorSplitRange(len, n, r);
        EXPECT_EQ(got.start, next) << len << " " << n << " " << r;
        EXPECT_EQ(got.stop - got.start, want) << len << " " << n << " " << r;
        next = got.stop;
      }
      EXPECT_EQ(next, len);
    }
  }
}

TEST(ShardStyle, ParsesTheThreeWordsOnly) {
  EXPECT_EQ(*ParseShardStyle("colwise"), ShardStyle::kColwise);
  EXPECT_EQ(*ParseShardStyle("rowwise"), ShardStyle::kRowwise);
  EXPECT_EQ(*ParseShardStyle("replicate"), ShardStyle::kReplicate);
  auto bad = ParseShardStyle("columnwise");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'columnwise'"), std::string::npos);
  EXPECT_FALSE(ParseShardStyle("Colwise").ok());
}

TEST(TensorParallel, RejectsBadRankAndSize) {
  std::vector<TensorInfo> ts = {Tensor("w", {4, 4})};
  auto zero = ShardTensors(ts, Tp(0, 0));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("tp_size must be at least 1, got 0"),
            std::string::npos);
  auto high = ShardTensors(ts, Tp(4, 4));
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(high.status().message().find("tp_rank 4 with tp_size 4"),
            std::string::npos);
  EXPECT_FALSE(ShardTensors(ts, Tp(-1, 2)).ok());
  auto huge = ShardTensors(ts, Tp(0, kMaxTpSize + 1));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("tp_size must be at most 65536"),
            std::string::npos)
      << huge.status().message();
  // The largest group splits in no time (the byte check per rank is only
  // for sub-byte slabs): the last rank's part of 4 rows is empty.
  auto largest = ShardTensors(
      ts, Tp(kMaxTpSize - 1, kMaxTpSize, {{"*", ShardStyle::kColwise}}));
  ASSERT_TRUE(largest.ok()) << largest.status().message();
  EXPECT_FALSE(ShardTensors(ts, Tp(0, 2, {{"", ShardStyle::kColwise}})).ok());
}

TEST(MatchPlan, FirstMatchWinsLikePythonFnmatch) {
  std::vector<TpPlanEntry> plan = {
      {"model.layers.0.*", ShardStyle::kReplicate},
      {"*.q_proj.weight", ShardStyle::kColwise},
      {"*proj*", ShardStyle::kRowwise},
      {"lm_hea[dx].weight", ShardStyle::kColwise},
      {"x[!a]", ShardStyle::kColwise},
  };
  EXPECT_EQ(MatchPlan(plan, "model.layers.0.self_attn.q_proj.weight"),
            &plan[0]);
  EXPECT_EQ(MatchPlan(plan, "model.layers.1.self_attn.q_proj.weight"),
            &plan[1]);
  EXPECT_EQ(MatchPlan(plan, "model.layers.1.self_attn.o_proj.weight"),
            &plan[2]);
  EXPECT_EQ(MatchPlan(plan, "lm_head.weight"), &plan[3]);
  EXPECT_EQ(MatchPlan(plan, "xb"), &plan[4]);
  EXPECT_EQ(MatchPlan(plan, "xa"), nullptr);
  EXPECT_EQ(MatchPlan(plan, "model.norm.weight"), nullptr);
  // '*' crosses '/' and leading dots, '\' is an ordinary character.
  std::vector<TpPlanEntry> odd = {{"a*b", ShardStyle::kColwise},
                                  {"c\\d", ShardStyle::kColwise}};
  EXPECT_EQ(MatchPlan(odd, "a/.x/b"), &odd[0]);
  EXPECT_EQ(MatchPlan(odd, "c\\d"), &odd[1]);
  EXPECT_EQ(MatchPlan(odd, "cd"), nullptr);
}

TEST(ShardTensors, PartsAreTensorSplitBitForBit) {
  std::mt19937_64 rng(11);
  const std::vector<std::vector<uint64_t>> shapes = {
      {7},        {8, 3},    {5, 11}, {3, 4, 5}, {1, 9},
      {2, 3, 13}, {16, 128}, {0, 4},  {4, 0},    {3}};
  for (const auto& shape : shapes) {
    for (ShardStyle style : {ShardStyle::kColwise, ShardStyle::kRowwise}) {
      for (int n : {1, 2, 3, 4, 8}) {
        TensorInfo t = Tensor("t", shape, DType::kF32);
        std::vector<uint8_t> bytes(t.size);
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
        std::vector<TensorInfo> ts = {t};
        uint64_t total = 0;
        for (int r = 0; r < n; ++r) {
          auto got = ShardTensors(ts, Tp(r, n, {{"t", style}}));
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          const TensorShard& s = got->shards[0];
          const bool splits = style == ShardStyle::kColwise ? !shape.empty()
                                                            : shape.size() >= 2;
          ASSERT_EQ(s.is_split(), splits);
          if (!splits) {
            EXPECT_EQ(s.style, ShardStyle::kReplicate);
            EXPECT_EQ(s.shape, shape);
            EXPECT_EQ(FromRuns(bytes, s), bytes);
            continue;
          }
          const size_t dim =
              style == ShardStyle::kColwise ? 0 : shape.size() - 1;
          EXPECT_EQ(s.dim, static_cast<int>(dim));
          SplitRange want = TensorSplitRange(shape[dim], n, r);
          EXPECT_EQ(s.start, want.start);
          EXPECT_EQ(s.stop, want.stop);
          std::vector<uint64_t> part_shape = shape;
          part_shape[dim] = want.stop - want.start;
          EXPECT_EQ(s.shape, part_shape);
          auto ref = ReferencePart(bytes, shape, 4, dim, want.start, want.stop);
          EXPECT_EQ(s.bytes, ref.size());
          EXPECT_EQ(FromRuns(bytes, s), ref)
              << "shape rank " << shape.size() << " n " << n << " r " << r;
          EXPECT_EQ(got->split_bytes, ref.size());
          total += s.bytes;
        }
        if (style == ShardStyle::kColwise ? !shape.empty()
                                          : shape.size() >= 2) {
          EXPECT_EQ(total, t.size);  // the parts cover the tensor once
        }
      }
    }
  }
}

TEST(ShardTensors, UnmatchedNamesReplicateAndUnusedPatternsWarn) {
  std::vector<TensorInfo> ts = {
      Tensor("a.q_proj.weight", {8, 4}), Tensor("a.o_proj.weight", {4, 8}),
      Tensor("a.o_proj.bias", {4}), Tensor("a.norm.weight", {4})};
  auto got = ShardTensors(ts, Tp(1, 2,
                                 {{"*.q_proj.*", ShardStyle::kColwise},
                                  {"*.o_proj.*", ShardStyle::kRowwise},
                                  {"*.q_proj.weight", ShardStyle::kRowwise},
                                  {"*.k_proj.*", ShardStyle::kColwise}}));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->shards[0].dim, 0);
  EXPECT_EQ(got->shards[0].shape, (std::vector<uint64_t>{4, 4}));
  EXPECT_EQ(got->shards[1].dim, 1);
  EXPECT_EQ(got->shards[1].shape, (std::vector<uint64_t>{4, 4}));
  EXPECT_EQ(got->shards[1].runs, 4u);
  EXPECT_FALSE(got->shards[2].is_split());  // 1-D under rowwise
  EXPECT_FALSE(got->shards[3].is_split());  // no pattern
  EXPECT_EQ(got->split_bytes, 2 * 16u * 2);
  EXPECT_EQ(got->replicated_bytes, 2 * 4u * 2);
  ASSERT_EQ(got->warnings.size(), 2u);
  EXPECT_NE(got->warnings[0].find("'*.q_proj.weight' (rowwise) is never used"),
            std::string::npos);
  EXPECT_NE(got->warnings[1].find("'*.k_proj.*' (colwise) matches no tensor"),
            std::string::npos);
}

TEST(ShardTensors, APlanThatSplitsNothingWarnsThatEveryRankLoadsItAll) {
  std::vector<TensorInfo> ts = {Tensor("a.q_proj.weight", {8, 4}),
                                Tensor("a.norm.weight", {4})};
  const uint64_t all = (8 * 4 + 4) * 2u;
  auto empty = ShardTensors(ts, Tp(1, 4, {}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->replicated_bytes, all);
  ASSERT_EQ(empty->warnings.size(), 1u);
  EXPECT_NE(empty->warnings[0].find("tp_plan is empty: every tensor is "
                                    "replicated, so each of the 4 ranks "
                                    "loads the whole checkpoint (" +
                                    std::to_string(all) + " bytes)"),
            std::string::npos)
      << empty->warnings[0];

  // Only a 1-D tensor under rowwise: still nothing split.
  auto none = ShardTensors(ts, Tp(0, 2, {{"*.norm.*", ShardStyle::kRowwise}}));
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->warnings.size(), 1u);
  EXPECT_NE(none->warnings[0].find("tp_plan splits no tensor"),
            std::string::npos)
      << none->warnings[0];

  // A group of one, an empty checkpoint, or a plan that splits something:
  // nothing to say.
  EXPECT_TRUE(ShardTensors(ts, Tp(0, 1, {}))->warnings.empty());
  EXPECT_TRUE(ShardTensors({}, Tp(0, 4, {}))->warnings.empty());
  EXPECT_TRUE(ShardTensors(ts, Tp(3, 4, {{"*.q_proj.*", ShardStyle::kColwise}}))
                  ->warnings.empty());
}

TEST(ShardRequests, SplitTensorsBecomeSlicesReplicatedOnesWhole) {
  std::vector<TensorInfo> ts = {Tensor("q", {10, 4}), Tensor("o", {4, 10}),
                                Tensor("b", {10}), Tensor("n", {4})};
  auto got = ShardTensors(ts, Tp(2, 3,
                                 {{"q", ShardStyle::kColwise},
                                  {"o", ShardStyle::kRowwise},
                                  {"b", ShardStyle::kRowwise}}));
  ASSERT_TRUE(got.ok());
  auto reqs = ShardRequests(ts, *got);
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].name, "q");
  EXPECT_EQ(reqs[0].slices,
            (std::vector<DimSlice>{{7, 10, 1}, {0, 4, 1}}));  // 4, 3, 3 rows
  EXPECT_EQ(reqs[1].slices, (std::vector<DimSlice>{{0, 4, 1}, {7, 10, 1}}));
  EXPECT_TRUE(reqs[2].slices.empty());  // 1-D under rowwise: whole
  EXPECT_TRUE(reqs[3].slices.empty());  // no pattern: whole
}

TEST(ShardTensors, SubByteSplitInsideAByteIsUnsupported) {
  // F4: two elements per byte. 6 columns in 4 parts: 2,2,1,1 cut a byte.
  std::vector<TensorInfo> ts = {Tensor("w", {2, 6}, DType::kF4)};
  auto bad = ShardTensors(ts, Tp(0, 4, {{"w", ShardStyle::kRowwise}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad.status().message().find("'w' (F4)"), std::string::npos);
  auto ok = ShardTensors(ts, Tp(1, 3, {{"w", ShardStyle::kRowwise}}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->shards[0].first_byte, 1u);
  EXPECT_EQ(ok->shards[0].run_bytes, 1u);
  EXPECT_EQ(ok->shards[0].run_stride, 3u);
}

}  // namespace
}  // namespace weightlift
