#include "plan/group_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "format/synth.h"
#include "format/testing/tensor_info.h"

namespace weightlift::internal {
namespace {

using testing::Tensor;

// Every tensor arrives whole on every rank exactly once: broadcast from one
// root, or all-gathered from equal dim-0 parts that tile it.
void ExpectDeliversEverything(const GroupPlan& plan,
                              const std::vector<TensorInfo>& ts, int n) {
  ASSERT_EQ(plan.steps.size(), ts.size());
  std::vector<uint64_t> read(static_cast<size_t>(n), 0);
  uint32_t last_batch = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const GroupStep& s = plan.steps[i];
    EXPECT_EQ(s.tensor, i);
    EXPECT_GE(s.batch, last_batch);  // batches follow tensor order
    last_batch = s.batch;
    switch (s.delivery) {
      case Delivery::kBroadcast:
        ASSERT_GE(s.root, 0);
        ASSERT_LT(s.root, n);
        read[static_cast<size_t>(s.root)] += ts[i].size;
        break;
      case Delivery::kAllGather:
        ASSERT_FALSE(ts[i].shape.empty());
        EXPECT_EQ(s.part_rows * static_cast<uint64_t>(n), ts[i].shape[0]);
        EXPECT_EQ(s.part_bytes * static_cast<uint64_t>(n), ts[i].size);
        for (auto& r : read) r += s.part_bytes;
        break;
      case Delivery::kLocal:
        break;
    }
  }
  EXPECT_EQ(plan.batches, last_batch + (ts.empty() ? 0 : 1));
  EXPECT_EQ(read, plan.bytes_read_per_rank);
}

std::vector<TensorInfo> Llama7B() {
  auto layout = LayoutTensors("llama2-7b");
  EXPECT_TRUE(layout.ok());
  std::vector<TensorInfo> ts;
  for (const auto& t : *layout) ts.push_back(Tensor(t.name, t.shape));
  return ts;
}

TEST(GroupPlan, FullModeSplitsTheLlamaReadingAboutEvenly) {
  const std::vector<TensorInfo> ts = Llama7B();
  uint64_t total = 0;
  for (const auto& t : ts) total += t.size;
  for (int n : {1, 2, 3, 4, 8}) {
    GroupPlan plan = PlanFullGroup(ts, n, {});
    ExpectDeliversEverything(plan, ts, n);
    uint64_t sum = 0;
    for (uint64_t b : plan.bytes_read_per_rank) {
      sum += b;
      EXPECT_LT(static_cast<double>(b), 1.1 * total / n + (4u << 20))
          << "n=" << n;
    }
    EXPECT_EQ(sum, total);  // every byte read once across the group
    EXPECT_EQ(plan.broadcast_bytes + plan.allgather_bytes,
              n == 1 ? plan.broadcast_bytes : total);
  }
}

TEST(GroupPlan, SmallOrUnevenTensorsAreBroadcastLargeEvenOnesGathered) {
  std::vector<TensorInfo> ts = {
      Tensor("big_even", {4096, 1024}),  // 8 MiB, 4096 % 4 == 0
      Tensor("big_odd", {4097, 1024}),   // not a multiple of 4
      Tensor("small", {64, 64}),         // below allgather_min_bytes
      Tensor("scalar", {}),
  };
  GroupPlan plan = PlanFullGroup(ts, 4, {});
  ExpectDeliversEverything(plan, ts, 4);
  EXPECT_EQ(plan.steps[0].delivery, Delivery::kAllGather);
  EXPECT_EQ(plan.steps[0].part_rows, 1024u);
  EXPECT_EQ(plan.steps[1].delivery, Delivery::kBroadcast);
  EXPECT_EQ(plan.steps[2].delivery, Delivery::kBroadcast);
  EXPECT_EQ(plan.steps[3].delivery, Delivery::kBroadcast);
  // The odd one goes to one rank, the small ones elsewhere first.
  EXPECT_NE(plan.steps[2].root, plan.steps[1].root);

  GroupPlanOptions whole;
  whole.partial_reads = false;
  GroupPlan no_parts = PlanFullGroup(ts, 4, whole);
  ExpectDeliversEverything(no_parts, ts, 4);
  for (const GroupStep& s : no_parts.steps) {
    EXPECT_EQ(s.delivery, Delivery::kBroadcast);
  }
}

TEST(GroupPlan, BatchesBoundTheBytesInFlight) {
  std::vector<TensorInfo> ts;
  for (int i = 0; i < 20; ++i)
    ts.push_back(Tensor("t" + std::to_string(i), {512, 1024}));
  GroupPlanOptions o;
  o.batch_bytes = 3u << 20;  // three 1 MiB tensors per batch
  GroupPlan plan = PlanFullGroup(ts, 3, o);
  ExpectDeliversEverything(plan, ts, 3);
  EXPECT_EQ(plan.batches, 7u);
  // Within a batch of three equal tensors each rank owns one.
  for (uint32_t b = 0; b + 1 < plan.batches; ++b) {
    std::vector<int> roots;
    for (const auto& s : plan.steps) {
      if (s.batch == b) roots.push_back(s.root);
    }
    std::sort(roots.begin(), roots.end());
    EXPECT_EQ(roots, (std::vector<int>{0, 1, 2})) << "batch " << b;
  }
}

TEST(GroupPlan, ShardedModeKeepsSplitTensorsLocal) {
  const std::vector<TensorInfo> ts = Llama7B();
  TensorParallel tp;
  tp.size = 4;
  tp.plan = {{"*.q_proj.weight", ShardStyle::kColwise},
             {"*.k_proj.weight", ShardStyle::kColwise},
             {"*.v_proj.weight", ShardStyle::kColwise},
             {"*.gate_proj.weight", ShardStyle::kColwise},
             {"*.up_proj.weight", ShardStyle::kColwise},
             {"*.o_proj.weight", ShardStyle::kRowwise},
             {"*.down_proj.weight", ShardStyle::kRowwise}};
  auto shards = ShardTensors(ts, tp);
  ASSERT_TRUE(shards.ok());
  GroupPlan plan = PlanShardedGroup(ts, *shards, 4, {});
  ExpectDeliversEverything(plan, ts, 4);
  uint64_t replicated = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(plan.steps[i].delivery == Delivery::kLocal,
              shards->shards[i].is_split());
    if (!shards->shards[i].is_split()) replicated += ts[i].size;
  }
  EXPECT_EQ(replicated, shards->replicated_bytes);
  uint64_t sum = 0;
  for (uint64_t b : plan.bytes_read_per_rank) sum += b;
  EXPECT_EQ(sum, replicated);  // each replicated byte read once in the group
}

TEST(GroupFingerprint, ChangesWithPlanCheckpointAndContentNotRank) {
  std::vector<TensorInfo> ts = {Tensor("a", {4, 4}, DType::kBF16, 100),
                                Tensor("b", {4}, DType::kBF16, 132)};
  std::vector<FileInfo> files(1);
  files[0].size = 140;
  TensorParallel tp;
  tp.size = 2;
  tp.plan = {{"a", ShardStyle::kColwise}};
  const std::string kSample = "0123456789abcdef";  // a tensor's 16 bytes
  const GroupPlanOptions kOpts;
  const std::string base =
      GroupFingerprint(ts, files, true, tp, kOpts, kSample);
  EXPECT_EQ(base.size(), 32u);
  TensorParallel other_rank = tp;
  other_rank.rank = 1;
  EXPECT_EQ(GroupFingerprint(ts, files, true, other_rank, kOpts, kSample),
            base);
  EXPECT_NE(GroupFingerprint(ts, files, false, tp, kOpts, kSample), base);
  TensorParallel other_plan = tp;
  other_plan.plan[0].style = ShardStyle::kRowwise;
  EXPECT_NE(GroupFingerprint(ts, files, true, other_plan, kOpts, kSample),
            base);
  TensorParallel other_size = tp;
  other_size.size = 4;
  EXPECT_NE(GroupFingerprint(ts, files, true, other_size, kOpts, kSample),
            base);
  auto moved = ts;
  moved[1].offset += 2;
  EXPECT_NE(GroupFingerprint(moved, files, true, tp, kOpts, kSample), base);
  auto reshaped = ts;
  reshaped[0].shape = {2, 8};
  EXPECT_NE(GroupFingerprint(reshaped, files, true, tp, kOpts, kSample), base);
  auto files2 = files;
  files2[0].size = 141;
  EXPECT_NE(GroupFingerprint(ts, files2, true, tp, kOpts, kSample), base);
  // Same layout, other weights: the content sample differs.
  EXPECT_NE(GroupFingerprint(ts, files, true, tp, kOpts, "0123456789abcdeF"),
            base);
  EXPECT_NE(GroupFingerprint(ts, files, true, tp, kOpts, ""), base);
  // Ranks that would batch or split differently (their collectives would
  // not match) disagree too.
  GroupPlanOptions batches = kOpts;
  batches.batch_bytes = 128u << 20;  // not the automatic size
  EXPECT_NE(GroupFingerprint(ts, files, true, tp, batches, kSample), base);
  // What counts is the size in effect: 0 (automatic) and the automatic
  // size spelled out batch alike, so they agree.
  ASSERT_EQ(kOpts.batch_bytes, 0u);
  GroupPlanOptions spelled = kOpts;
  spelled.batch_bytes = kMinAutoBatchBytes;  // these few tensors' size
  EXPECT_EQ(GroupFingerprint(ts, files, true, tp, spelled, kSample), base);
  GroupPlanOptions gathers = kOpts;
  gathers.allgather_min_bytes = 1;
  EXPECT_NE(GroupFingerprint(ts, files, true, tp, gathers, kSample), base);
  GroupPlanOptions whole = kOpts;
  whole.partial_reads = false;
  EXPECT_NE(GroupFingerprint(ts, files, true, tp, whole, kSample), base);
}

// The automatic batch size (batch_bytes 0): about kAutoBatches batches of
// a large checkpoint, none under kMinAutoBatchBytes for a small one.
TEST(GroupPlanTest, AutomaticBatchesAreFewAndNotSmall) {
  EXPECT_EQ(AutoBatchBytes(0), kMinAutoBatchBytes);
  EXPECT_EQ(AutoBatchBytes(1u << 30), kMinAutoBatchBytes);
  EXPECT_EQ(AutoBatchBytes(13476831232ull), 1684603904ull);  // Llama-2-7B / 8
  EXPECT_EQ(AutoBatchBytes(32ull << 30), 4ull << 30);        // an eighth
  // 405B in bf16: capped, so a batch's reads stay well inside a timeout.
  EXPECT_EQ(AutoBatchBytes(810ull * 1000 * 1000 * 1000), kMaxAutoBatchBytes);
  // 64 tensors of 256 MiB (16 GiB): 8 batches of 8.
  std::vector<TensorInfo> big;
  for (int i = 0; i < 64; ++i) {
    big.push_back(Tensor("t" + std::to_string(i), {8192, 16384}, DType::kBF16,
                         static_cast<uint64_t>(i) << 28));
  }
  GroupPlanOptions automatic;
  ASSERT_EQ(automatic.batch_bytes, 0u);
  EXPECT_EQ(PlanFullGroup(big, 4, automatic).batches, 8u);
  // A small checkpoint is one batch.
  std::vector<TensorInfo> small(big.begin(), big.begin() + 1);
  EXPECT_EQ(PlanFullGroup(small, 4, automatic).batches, 1u);
}

}  // namespace
}  // namespace weightlift::internal
