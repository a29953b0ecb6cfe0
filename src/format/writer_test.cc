// Valid files round-tripped: written by the writer, re-read by the parser
// (ReadHeaderFile and Checkpoint::Open), compared field by field.
#include "format/writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "format/header.h"
#include "format/test_util.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {
namespace {

using testing::ReadFile;
using testing::TempDir;

struct Owned {
  TensorToWrite t;
  std::vector<std::byte> bytes;
};

// A tensor with deterministic contents.
Owned Make(std::string name, DType d, std::vector<uint64_t> shape) {
  Owned o;
  o.t.name = std::move(name);
  o.t.dtype = d;
  o.t.shape = std::move(shape);
  const uint64_t n = *TensorBytes(o.t.shape, d, "t");
  o.bytes.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    o.bytes[i] = static_cast<std::byte>((i * 31 + o.t.name.size()) & 0xFF);
  }
  return o;
}

// Writes OWNED, re-reads it both ways and checks every field and byte.
void RoundTrip(std::vector<Owned>& owned, const WriteOptions& options) {
  TempDir dir;
  const std::string path = dir / "t.safetensors";
  std::vector<TensorToWrite> in;
  for (Owned& o : owned) {
    o.t.data = o.bytes;
    in.push_back(o.t);
  }
  Status s = WriteSafetensors(path, in, options);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string file = ReadFile(path);

  StatusOr<ParsedHeader> h = ReadHeaderFile(path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->metadata, options.metadata);
  EXPECT_EQ(h->file_size, file.size());
  if (options.pad_header) {
    EXPECT_EQ(h->data_offset % 8, 0u);
  }
  ASSERT_EQ(h->tensors.size(), owned.size());

  StatusOr<Checkpoint> ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->tensors().size(), owned.size());
  EXPECT_EQ(ck->metadata(), options.metadata);
  uint64_t total = 0;
  for (const Owned& o : owned) {
    const TensorInfo* t = ck->Find(o.t.name);
    ASSERT_NE(t, nullptr) << o.t.name;
    EXPECT_EQ(t->dtype, o.t.dtype) << o.t.name;
    EXPECT_EQ(t->shape, o.t.shape) << o.t.name;
    EXPECT_EQ(t->size, o.bytes.size()) << o.t.name;
    EXPECT_EQ(t->file, 0u);
    uint64_t elems = 1;
    for (uint64_t d : o.t.shape) elems *= d;
    EXPECT_EQ(t->num_elements(), elems);
    ASSERT_LE(t->offset + t->size, file.size());
    EXPECT_TRUE(
        std::equal(o.bytes.begin(), o.bytes.end(),
                   reinterpret_cast<const std::byte*>(file.data()) + t->offset))
        << o.t.name;
    // Packed data is aligned to the element size as the reference does it.
    const int bits = DTypeBits(o.t.dtype);
    if (options.reference_order && bits >= 8 && options.pad_header) {
      EXPECT_EQ(t->offset % (bits / 8), 0u) << o.t.name;
    }
    EXPECT_EQ(ck->IndexOf(o.t.name), t - ck->tensors().data());
    total += t->size;
  }
  EXPECT_EQ(ck->total_bytes(), total);
  for (size_t i = 1; i < ck->tensors().size(); ++i) {
    EXPECT_LE(ck->tensors()[i - 1].offset, ck->tensors()[i].offset);
  }
  EXPECT_EQ(ck->Find("absent"), nullptr);
  EXPECT_EQ(ck->IndexOf("absent"), -1);
}

TEST(Writer, EveryDtypeWithMetadata) {
  std::vector<Owned> owned;
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    owned.push_back(Make("t_" + std::string(DTypeName(d)), d, {3, 8}));
  }
  WriteOptions o;
  o.metadata = {{"format", "pt"}, {"note", "quote \" backslash \\ nl \n"}};
  RoundTrip(owned, o);
}

TEST(Writer, ScalarsEmptiesAndSubByte) {
  std::vector<Owned> owned;
  owned.push_back(Make("scalar", DType::kF32, {}));
  owned.push_back(Make("empty", DType::kF32, {0}));
  owned.push_back(Make("empty_2d", DType::kBF16, {4, 0}));
  owned.push_back(Make("f4", DType::kF4, {2, 3}));
  owned.push_back(Make("f6a", DType::kF6_E2M3, {4}));
  owned.push_back(Make("f6b", DType::kF6_E3M2, {2, 2, 2}));
  owned.push_back(Make("bool", DType::kBool, {1}));
  RoundTrip(owned, {});
}

TEST(Writer, UnicodeAndEscapedNames) {
  std::vector<Owned> owned;
  owned.push_back(Make("模型.层.0.权重", DType::kF16, {2}));
  owned.push_back(Make("emoji 😀 🚀", DType::kU8, {5}));
  owned.push_back(Make("quote\"back\\slash", DType::kI32, {1}));
  owned.push_back(Make("ctl\x01\ttab\nnl", DType::kI8, {3}));
  owned.push_back(Make("/slash/name", DType::kI8, {1}));
  RoundTrip(owned, {});
}

TEST(Writer, UnpaddedAndGivenOrder) {
  std::vector<Owned> owned;
  owned.push_back(Make("z", DType::kU8, {3}));
  owned.push_back(Make("a", DType::kF64, {1}));
  WriteOptions o;
  o.pad_header = false;
  o.reference_order = false;
  RoundTrip(owned, o);
  // Unpadded: N is exactly the JSON length, which here is not a multiple of 8.
  StatusOr<std::string> json = BuildHeaderJson({owned[0].t, owned[1].t}, o);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->back(), '}');
}

TEST(Writer, ThousandsOfTensors) {
  std::vector<Owned> owned;
  for (int i = 0; i < 5000; ++i) {
    owned.push_back(Make("layer." + std::to_string(i) + ".w",
                         i % 3 == 0 ? DType::kBF16 : DType::kF32,
                         {static_cast<uint64_t>(i % 7)}));
  }
  RoundTrip(owned, {});
}

TEST(Writer, ReferenceOrderAndPadding) {
  std::vector<TensorToWrite> ts(4);
  ts[0] = {"b", DType::kU8, {1}, {}, {}};
  ts[1] = {"a", DType::kU8, {1}, {}, {}};
  ts[2] = {"c", DType::kF64, {1}, {}, {}};
  ts[3] = {"d", DType::kBF16, {1}, {}, {}};
  SortLikeReference(&ts);
  std::vector<std::string> names;
  for (auto& t : ts) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c", "d", "a", "b"}));
  StatusOr<std::string> json = BuildHeaderJson(ts, {});
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->size() % 8, 0u);
  EXPECT_TRUE(json->starts_with(
      "{\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"d\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[8,10]},"))
      << *json;
}

TEST(Writer, GeneratorStreamsPiecesInOrder) {
  TempDir dir;
  const std::string path = dir / "g.safetensors";
  const uint64_t n = (uint64_t{20} << 20) + 5;  // > the 16 MiB buffer
  std::vector<std::pair<uint64_t, size_t>> calls;
  TensorToWrite big{"big", DType::kU8, {n}, {}, {}};
  big.generate = [&](uint64_t off, std::span<std::byte> out) {
    calls.emplace_back(off, out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<std::byte>((off + i) % 251);
    }
  };
  std::vector<std::byte> small_bytes(3, std::byte{7});
  TensorToWrite small{"small", DType::kU8, {3}, small_bytes, {}};
  ASSERT_TRUE(WriteSafetensors(path, {big, small}).ok());
  uint64_t expect = 0;
  for (auto [off, size] : calls) {
    EXPECT_EQ(off, expect);
    EXPECT_GT(size, 0u);
    expect += size;
  }
  EXPECT_EQ(expect, n);
  EXPECT_GE(calls.size(), 2u);
  StatusOr<Checkpoint> ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const TensorInfo* t = ck->Find("big");
  ASSERT_NE(t, nullptr);
  const std::string file = ReadFile(path);
  for (uint64_t i : {uint64_t{0}, uint64_t{1} << 24, n - 1}) {
    EXPECT_EQ(static_cast<uint8_t>(file[t->offset + i]), i % 251) << i;
  }
}

TEST(Writer, RejectsBadInput) {
  TempDir dir;
  std::vector<std::byte> two(2);
  auto write = [&](std::vector<TensorToWrite> ts) {
    return WriteSafetensors(dir / "bad.safetensors", std::move(ts));
  };
  EXPECT_EQ(write({{"", DType::kU8, {2}, two, {}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write({{"__metadata__", DType::kU8, {2}, two, {}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(
      write({{"a", DType::kU8, {2}, two, {}}, {"a", DType::kU8, {2}, two, {}}})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(write({{"a", DType::kU8, {3}, two, {}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write({{"a\xff", DType::kU8, {2}, two, {}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write({{"a", DType::kF4, {3}, two, {}}}).code(),
            StatusCode::kInvalidArgument);
  // Nothing is left behind.
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors.tmp"));
  // An unwritable place is an IoError naming the path.
  Status s = WriteSafetensors(dir / "no/such/dir/x.safetensors",
                              {{"a", DType::kU8, {2}, two, {}}});
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos);
}

TEST(Writer, ShardedCheckpointWithIndex) {
  TempDir dir;
  std::vector<std::byte> b4(4, std::byte{1}), b8(8, std::byte{2});
  std::vector<std::vector<TensorToWrite>> shards = {
      {{"x.0", DType::kF32, {1}, b4, {}}, {"x.1", DType::kF32, {2}, b8, {}}},
      {{"y", DType::kU8, {4}, b4, {}}}};
  ASSERT_TRUE(WriteShardedCheckpoint(dir.path(), shards).ok());
  const std::string index = ReadFile(dir / "model.safetensors.index.json");
  EXPECT_NE(index.find("\"total_size\": 16"), std::string::npos) << index;
  EXPECT_NE(index.find("\"y\": \"model-00002-of-00002.safetensors\""),
            std::string::npos)
      << index;
  StatusOr<Checkpoint> ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->tensors().size(), 3u);
  EXPECT_EQ(ck->Find("y")->file, 1u);
  EXPECT_EQ(ck->total_bytes(), 16u);
  EXPECT_EQ(ck->index_path(), dir / "model.safetensors.index.json");
  EXPECT_EQ(ShardFileName(3, 12), "model-00003-of-00012.safetensors");
}

}  // namespace
}  // namespace weightlift::internal
