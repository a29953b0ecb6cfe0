#include "format/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "format/test_util.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {
namespace {

using testing::ReadFile;
using testing::TempDir;

TEST(Synth, LayoutTotalsMatchTheRealModels) {
  std::map<std::string, LayoutSummary> by_name;
  for (const LayoutSummary& s : ListLayouts()) by_name[s.name] = s;
  ASSERT_EQ(by_name.size(), 5u);
  EXPECT_EQ(by_name["llama2-7b"].num_params, 6'738'415'616u);
  EXPECT_EQ(by_name["llama2-7b"].total_bytes, 13'476'831'232u);
  EXPECT_EQ(by_name["llama2-7b"].num_tensors, 2u + 32 * 9 + 1);
  EXPECT_EQ(by_name["llama2-13b"].num_params, 13'015'864'320u);
  EXPECT_EQ(by_name["llama3-8b"].num_params, 8'030'261'248u);
  // TinyLlama-1.1B's published parameter count.
  EXPECT_EQ(by_name["tinyllama-1.1b"].num_params, 1'100'048'384u);
  EXPECT_LT(by_name["tiny"].total_bytes, 8u << 20);
  EXPECT_GT(by_name["tiny"].total_bytes, 1u << 20);
}

TEST(Synth, RealNamesAndShapes) {
  StatusOr<std::vector<SynthTensor>> ts = LayoutTensors("llama3-8b");
  ASSERT_TRUE(ts.ok());
  std::map<std::string, std::vector<uint64_t>> shapes;
  for (const SynthTensor& t : *ts) {
    EXPECT_EQ(t.dtype, DType::kBF16);
    shapes[t.name] = t.shape;
  }
  EXPECT_EQ(shapes["model.embed_tokens.weight"],
            (std::vector<uint64_t>{128256, 4096}));
  EXPECT_EQ(shapes["model.layers.31.self_attn.k_proj.weight"],
            (std::vector<uint64_t>{1024, 4096}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"],
            (std::vector<uint64_t>{4096, 14336}));
  EXPECT_EQ(shapes["model.layers.7.input_layernorm.weight"],
            (std::vector<uint64_t>{4096}));
  EXPECT_EQ(shapes["lm_head.weight"], (std::vector<uint64_t>{128256, 4096}));
  EXPECT_EQ(shapes["model.norm.weight"], (std::vector<uint64_t>{4096}));
  EXPECT_FALSE(LayoutTensors("gpt-5").ok());
}

TEST(Synth, ShardsBalancedByLayer) {
  StatusOr<std::vector<SynthTensor>> ts = LayoutTensors("llama2-7b");
  ASSERT_TRUE(ts.ok());
  for (int n : {1, 2, 3, 5, 34}) {
    auto shards = SplitIntoShards(*ts, n);
    ASSERT_TRUE(shards.ok()) << n;
    ASSERT_EQ(shards->size(), static_cast<size_t>(n));
    uint64_t total = 0, biggest = 0;
    std::set<int> units_seen;
    int last_unit = -1;
    for (const auto& shard : *shards) {
      ASSERT_FALSE(shard.empty());
      uint64_t bytes = 0;
      for (const SynthTensor& t : shard) {
        bytes += t.bytes;
        // A unit never spans two shards, and order is kept.
        if (t.unit != last_unit) {
          EXPECT_TRUE(units_seen.insert(t.unit).second);
          EXPECT_GT(t.unit, last_unit);
        }
        last_unit = t.unit;
      }
      total += bytes;
      biggest = std::max(biggest, bytes);
    }
    EXPECT_EQ(total, 13'476'831'232u);
    if (n <= 5) {
      EXPECT_LT(static_cast<double>(biggest), 1.15 * total / n) << n;
    }
  }
  EXPECT_FALSE(SplitIntoShards(*ts, 0).ok());
  EXPECT_FALSE(SplitIntoShards(*ts, 35).ok());
}

TEST(Synth, FillIsRandomAccessAndFinite) {
  const uint64_t seed = SynthTensorSeed(42, "x");
  EXPECT_NE(seed, SynthTensorSeed(43, "x"));
  EXPECT_NE(seed, SynthTensorSeed(42, "y"));
  std::vector<std::byte> whole(1000), pieces(1000);
  SynthFill(seed, 0, whole);
  size_t off = 0;
  for (size_t len : {3, 1, 8, 13, 0, 100, 875}) {
    SynthFill(seed, off, std::span(pieces).subspan(off, len));
    off += len;
  }
  ASSERT_EQ(off, 1000u);
  EXPECT_EQ(whole, pieces);
  for (size_t i = 0; i < whole.size(); i += 2) {
    uint16_t v;
    std::memcpy(&v, &whole[i], 2);
    uint32_t f = static_cast<uint32_t>(v) << 16;  // bf16 -> f32
    float x;
    std::memcpy(&x, &f, 4);
    EXPECT_TRUE(std::isfinite(x)) << i;
  }
}

TEST(Synth, TinyRoundTrip) {
  for (int shards : {1, 3}) {
    TempDir dir;
    Status s = Synthesize("tiny", shards, dir.path(), 7);
    ASSERT_TRUE(s.ok()) << s.ToString();
    StatusOr<Checkpoint> ck = Checkpoint::Open(dir.path());
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    EXPECT_EQ(ck->files().size(), static_cast<size_t>(shards));
    EXPECT_EQ(ck->index_path().empty(), shards == 1);
    EXPECT_EQ(ck->metadata().at("format"), "pt");
    StatusOr<std::vector<SynthTensor>> ts = LayoutTensors("tiny");
    ASSERT_EQ(ck->tensors().size(), ts->size());
    uint64_t total = 0;
    for (const SynthTensor& t : *ts) {
      const TensorInfo* info = ck->Find(t.name);
      ASSERT_NE(info, nullptr) << t.name;
      EXPECT_EQ(info->shape, t.shape);
      total += t.bytes;
    }
    EXPECT_EQ(ck->total_bytes(), total);
    // The bytes on disk are SynthFill's.
    const TensorInfo* t = ck->Find("model.layers.1.mlp.up_proj.weight");
    const std::string file = ReadFile(ck->files()[t->file].path);
    std::vector<std::byte> want(t->size);
    SynthFill(SynthTensorSeed(7, t->name), 0, want);
    EXPECT_EQ(std::memcmp(file.data() + t->offset, want.data(), t->size), 0);
  }
}

TEST(Synth, ShardNamesAsHuggingFace) {
  TempDir dir;
  ASSERT_TRUE(Synthesize("tiny", 2, dir.path(), 1).ok());
  EXPECT_TRUE(
      std::filesystem::exists(dir / "model-00001-of-00002.safetensors"));
  EXPECT_TRUE(
      std::filesystem::exists(dir / "model-00002-of-00002.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  EXPECT_EQ(Synthesize("nope", 2, dir.path(), 1).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace weightlift::internal
