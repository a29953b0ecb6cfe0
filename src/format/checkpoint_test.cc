// Checkpoint::Open on real files in temp directories: single files, plain
// directories, indexes and their rules, Hugging Face cache symlinks.
#include "weightlift/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/index.h"
#include "format/test_util.h"
#include "format/writer.h"

namespace weightlift {
namespace {

using internal::TensorToWrite;
using internal::testing::Bytes;
using internal::testing::Image;
using internal::testing::TempDir;
using internal::testing::WriteFile;
namespace fs = std::filesystem;

const std::vector<std::byte> kZeros(64);

TensorToWrite T(std::string name, uint64_t n = 4) {
  return {std::move(name),
          DType::kU8,
          {n},
          std::span<const std::byte>(kZeros.data(), n),
          {}};
}

void Write(const std::string& path, std::vector<TensorToWrite> ts) {
  Status s = internal::WriteSafetensors(path, std::move(ts));
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::string IndexJson(
    const std::vector<std::pair<std::string, std::string>>& map) {
  std::string s = "{\"metadata\":{\"total_size\":0},\"weight_map\":{";
  for (size_t i = 0; i < map.size(); ++i) {
    if (i) s += ",";
    // Escaped as JSON, so names with control bytes or '\\' reach the
    // shard-name rules rather than failing as bad JSON.
    s += nlohmann::json(map[i].first).dump() + ":" +
         nlohmann::json(map[i].second).dump();
  }
  return s + "}}";
}

// A two-shard checkpoint: a.safetensors {w1, w2}, b.safetensors {w3}.
struct TwoShards {
  TempDir dir;
  TwoShards() {
    Write(dir / "a.safetensors", {T("w1"), T("w2", 8)});
    Write(dir / "b.safetensors", {T("w3", 2)});
  }
  void Index(const std::vector<std::pair<std::string, std::string>>& map) {
    WriteFile(dir / "model.safetensors.index.json", IndexJson(map));
  }
};

void ExpectRule(const StatusOr<Checkpoint>& r, FormatError rule,
                std::string_view in_message = {}) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption)
      << r.status().ToString();
  EXPECT_EQ(r.status().rule(), rule) << r.status().ToString();
  EXPECT_NE(r.status().message().find(in_message), std::string::npos)
      << r.status().message();
}

TEST(CheckpointOpen, SingleFileAbsoluteOffsets) {
  TempDir dir;
  const std::string path = dir / "m.safetensors";
  Write(path, {T("a", 3), T("b", 5)});
  StatusOr<Checkpoint> ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files().size(), 1u);
  const FileInfo& f = ck->files()[0];
  EXPECT_EQ(f.path, path);
  EXPECT_EQ(f.resolved_path, fs::canonical(path).string());
  EXPECT_EQ(f.data_offset, 8 + f.header_size);
  EXPECT_EQ(f.size, f.data_offset + 8);
  EXPECT_EQ(ck->Find("a")->offset, f.data_offset);
  EXPECT_EQ(ck->Find("b")->offset, f.data_offset + 3);
  EXPECT_EQ(ck->total_bytes(), 8u);
  EXPECT_TRUE(ck->index_path().empty());
}

// safetensors tells an absent __metadata__ (None) from an empty one ({}).
TEST(CheckpointOpen, EmptyMetadataIsNotAbsentMetadata) {
  TempDir dir;
  const std::string with = dir / "with.safetensors";
  const std::string without = dir / "without.safetensors";
  WriteFile(with, Image(R"({"__metadata__":{},"a":{"dtype":"U8","shape":[1],)"
                        R"("data_offsets":[0,1]}})",
                        1));
  WriteFile(
      without,
      Image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
  StatusOr<Checkpoint> a = Checkpoint::Open(with);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->files()[0].has_metadata);
  EXPECT_TRUE(a->files()[0].metadata.empty());
  StatusOr<Checkpoint> b = Checkpoint::Open(without);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(b->files()[0].has_metadata);
}

TEST(CheckpointOpen, MissingPathIsNotFound) {
  TempDir dir;
  StatusOr<Checkpoint> r = Checkpoint::Open(dir / "nope.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir / "nope.safetensors"),
            std::string::npos);
}

TEST(CheckpointOpen, PathWithANulByteIsRefusedNotTruncated) {
  TempDir dir;
  Write(dir / "a.safetensors", {T("w1")});
  const std::string path = dir / "a.safetensors" + std::string(1, '\0') + "x";
  StatusOr<Checkpoint> r = Checkpoint::Open(path);
  ASSERT_FALSE(r.ok()) << "opened " << dir / "a.safetensors";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("NUL byte"), std::string::npos)
      << r.status().message();
}

TEST(CheckpointOpen, DirectoryWithoutSafetensorsIsNotFound) {
  TempDir dir;
  WriteFile(dir / "README.md", "hi");
  fs::create_directory(dir / "sub.safetensors");  // a directory: skipped
  fs::create_symlink(dir / "gone", dir / "dangling.safetensors");
  StatusOr<Checkpoint> r = Checkpoint::Open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no *.safetensors"), std::string::npos)
      << r.status().message();
}

TEST(CheckpointOpen, FifosAreRefusedWithoutWaitingForAWriter) {
  // A FIFO named like a checkpoint file, alone, as a shard of a directory,
  // or as the index: open(2) would block until a writer came.
  for (const char* name :
       {"model.safetensors", "model.safetensors.index.json"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    ASSERT_EQ(::mkfifo((dir / name).c_str(), 0600), 0);
    StatusOr<Checkpoint> r = Checkpoint::Open(dir / name);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(name), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(Checkpoint::Open(dir.path()).ok());
  }
  TwoShards c;
  fs::remove(c.dir / "b.safetensors");
  ASSERT_EQ(::mkfifo((c.dir / "b.safetensors").c_str(), 0600), 0);
  c.Index({{"w1", "a.safetensors"},
           {"w2", "a.safetensors"},
           {"w3", "b.safetensors"}});
  StatusOr<Checkpoint> r = Checkpoint::Open(c.dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.safetensors"), std::string::npos)
      << r.status().message();
}

TEST(CheckpointOpen, PlainDirectorySortedByName) {
  TempDir dir;
  Write(dir / "b.safetensors", {T("y")});
  Write(dir / "a.safetensors", {T("x"), T("z")});
  WriteFile(dir / "config.json", "{}");
  StatusOr<Checkpoint> ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->files()[0].path, dir / "a.safetensors");
  EXPECT_EQ(ck->files()[1].path, dir / "b.safetensors");
  ASSERT_EQ(ck->tensors().size(), 3u);
  EXPECT_EQ(ck->tensors()[0].name, "x");
  EXPECT_EQ(ck->tensors()[1].name, "z");
  EXPECT_EQ(ck->tensors()[2].name, "y");
  EXPECT_EQ(ck->tensors()[2].file, 1u);
}

TEST(CheckpointOpen, SameTensorInTwoFiles) {
  TempDir dir;
  Write(dir / "a.safetensors", {T("x")});
  Write(dir / "b.safetensors", {T("x")});
  ExpectRule(Checkpoint::Open(dir.path()), FormatError::kDuplicateTensor,
             "'x'");
}

TEST(CheckpointOpen, BrokenFileInDirectoryNamesTheFile) {
  TempDir dir;
  Write(dir / "a.safetensors", {T("x")});
  WriteFile(dir / "b.safetensors", "short");
  ExpectRule(Checkpoint::Open(dir.path()), FormatError::kFileTooSmall,
             dir / "b.safetensors");
}

TEST(CheckpointIndex, ValidByDirectoryAndByPath) {
  TwoShards c;
  c.Index({{"w1", "a.safetensors"},
           {"w2", "a.safetensors"},
           {"w3", "b.safetensors"}});
  for (const std::string& p :
       {c.dir.path(), c.dir / "model.safetensors.index.json"}) {
    StatusOr<Checkpoint> ck = Checkpoint::Open(p);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    EXPECT_EQ(ck->index_path(), c.dir / "model.safetensors.index.json");
    ASSERT_EQ(ck->files().size(), 2u);
    EXPECT_EQ(ck->Find("w3")->file, 1u);
    EXPECT_EQ(ck->total_bytes(), 14u);
  }
}

TEST(CheckpointIndex, OnlyShardsOfTheIndexAreOpened) {
  TwoShards c;
  Write(c.dir / "stale.safetensors", {T("w1")});  // ignored: not in index
  c.Index({{"w1", "a.safetensors"},
           {"w2", "a.safetensors"},
           {"w3", "b.safetensors"}});
  StatusOr<Checkpoint> ck = Checkpoint::Open(c.dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->files().size(), 2u);
}

TEST(CheckpointIndex, MissingShard) {
  TwoShards c;
  c.Index({{"w1", "a.safetensors"},
           {"w2", "a.safetensors"},
           {"w3", "b.safetensors"},
           {"w4", "c.safetensors"}});
  ExpectRule(Checkpoint::Open(c.dir.path()), FormatError::kIndexMissingShard,
             "c.safetensors");
}

TEST(CheckpointIndex, TensorOfShardNotInIndex) {
  TwoShards c;
  c.Index({{"w1", "a.safetensors"}, {"w3", "b.safetensors"}});
  ExpectRule(Checkpoint::Open(c.dir.path()), FormatError::kIndexTensorExtra,
             "'w2'");
}

TEST(CheckpointIndex, TensorMappedToWrongShard) {
  TwoShards c;
  c.Index({{"w1", "a.safetensors"},
           {"w2", "b.safetensors"},
           {"w3", "b.safetensors"}});
  ExpectRule(Checkpoint::Open(c.dir.path()), FormatError::kIndexTensorExtra,
             "'w2'");
}

TEST(CheckpointIndex, TensorOfIndexNotInShard) {
  TwoShards c;
  c.Index({{"w1", "a.safetensors"},
           {"w2", "a.safetensors"},
           {"w3", "b.safetensors"},
           {"w9", "b.safetensors"}});
  ExpectRule(Checkpoint::Open(c.dir.path()), FormatError::kIndexTensorMissing,
             "'w9'");
}

TEST(CheckpointIndex, UnsafeShardPaths) {
  for (std::string bad :
       {"../x.safetensors", "/abs.safetensors", "sub/../../x.safetensors", "..",
        "a/..", "", "%2e%2e/x.safetensors", "..%2fx.safetensors",
        "a?.safetensors", "a#b.safetensors", "..\\x.safetensors",
        "a\nb.safetensors", "\x1b]0;t\x07x.safetensors"}) {
    SCOPED_TRACE(bad);
    TwoShards c;
    c.Index({{"w1", bad}});
    ExpectRule(Checkpoint::Open(c.dir.path()), FormatError::kIndexUnsafePath);
  }
  EXPECT_TRUE(internal::IsSafeShardName("sub/model.safetensors"));
  EXPECT_TRUE(internal::IsSafeShardName("..a.safetensors"));
  EXPECT_TRUE(internal::IsSafeShardName("a../b"));
}

TEST(CheckpointIndex, EmptyWeightMapIsRefused) {
  // {"weight_map": {}} would load nothing and report success.
  TwoShards c;
  c.Index({});
  auto ckpt = Checkpoint::Open(c.dir.path());
  ExpectRule(ckpt, FormatError::kIndexNoWeightMap);
  EXPECT_NE(ckpt.status().message().find("lists no tensors"), std::string::npos)
      << ckpt.status().message();
}

TEST(CheckpointIndex, SubdirectoryShardsAllowed) {
  TempDir dir;
  fs::create_directory(dir / "sub");
  Write(dir / "sub/a.safetensors", {T("w1")});
  WriteFile(dir / "model.safetensors.index.json",
            IndexJson({{"w1", "sub/a.safetensors"}}));
  StatusOr<Checkpoint> ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->files()[0].path, dir / "sub/a.safetensors");
}

TEST(CheckpointIndex, MalformedIndexes) {
  struct Case {
    std::string json;
    FormatError rule;
  };
  const Case cases[] = {
      {"{", FormatError::kIndexBadJson},
      {"[]", FormatError::kIndexBadJson},
      {"{\"weight_map\":{}} x", FormatError::kIndexBadJson},
      {"\xff{}", FormatError::kIndexBadJson},
      {"{\"metadata\":3,\"weight_map\":{}}", FormatError::kIndexBadJson},
      {"{\"metadata\":{}}", FormatError::kIndexNoWeightMap},
      {"{\"weight_map\":[]}", FormatError::kIndexNoWeightMap},
      {"{\"weight_map\":{\"w1\":3}}", FormatError::kIndexBadEntry},
      {"{\"weight_map\":{\"w1\":null}}", FormatError::kIndexBadEntry},
      {"{\"weight_map\":{\"\":\"a.safetensors\"}}",
       FormatError::kIndexBadEntry},
      {"{\"weight_map\":{\"w1\":\"a.safetensors\",\"w1\":\"a.safetensors\"}}",
       FormatError::kDuplicateKey},
      {"{\"weight_map\":{},\"weight_map\":{}}", FormatError::kDuplicateKey},
      {"{\"weight_map\":{\"w1\":\"a\\u0000.safetensors\"}}",
       FormatError::kIndexUnsafePath},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    TwoShards t;
    WriteFile(t.dir / "model.safetensors.index.json", c.json);
    ExpectRule(Checkpoint::Open(t.dir.path()), c.rule,
               "model.safetensors.index.json");
  }
}

TEST(CheckpointIndex, TooLargeIndexIsRefusedUnread) {
  TempDir dir;
  const std::string path = dir / "model.safetensors.index.json";
  WriteFile(path, "");
  // Sparse: costs no disk, and the reader refuses it from fstat alone.
  ASSERT_EQ(truncate(path.c_str(), kMaxHeaderBytes + 1), 0);
  ExpectRule(Checkpoint::Open(dir.path()), FormatError::kIndexTooLarge);
}

TEST(CheckpointIndex, OtherIndexNamesAndAmbiguity) {
  TwoShards c;
  WriteFile(c.dir / "diffusion_pytorch_model.safetensors.index.json",
            IndexJson({{"w1", "a.safetensors"},
                       {"w2", "a.safetensors"},
                       {"w3", "b.safetensors"}}));
  EXPECT_TRUE(Checkpoint::Open(c.dir.path()).ok());
  WriteFile(c.dir / "other.safetensors.index.json", "{}");
  StatusOr<Checkpoint> r = Checkpoint::Open(c.dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// The Hugging Face cache: snapshots/<rev>/<file> -> ../../blobs/<hash>.
TEST(CheckpointIndex, HuggingFaceCacheSymlinks) {
  TempDir root;
  fs::create_directories(root / "blobs");
  fs::create_directories(root / "snapshots/abc123");
  Write(root / "blobs/1111", {T("w1"), T("w2", 8)});
  Write(root / "blobs/2222", {T("w3", 2)});
  WriteFile(root / "blobs/3333", IndexJson({{"w1", "model-1.safetensors"},
                                            {"w2", "model-1.safetensors"},
                                            {"w3", "model-2.safetensors"}}));
  const std::string snap = root / "snapshots/abc123";
  fs::create_symlink("../../blobs/1111", snap + "/model-1.safetensors");
  fs::create_symlink("../../blobs/2222", snap + "/model-2.safetensors");
  fs::create_symlink("../../blobs/3333",
                     snap + "/model.safetensors.index.json");
  StatusOr<Checkpoint> ck = Checkpoint::Open(snap);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->files()[0].path, snap + "/model-1.safetensors");
  EXPECT_EQ(ck->files()[0].resolved_path,
            fs::canonical(root / "blobs/1111").string());
  EXPECT_EQ(ck->files()[1].resolved_path,
            fs::canonical(root / "blobs/2222").string());
  // Without the index, the symlinked shards are found by listing.
  fs::remove(snap + "/model.safetensors.index.json");
  ck = Checkpoint::Open(snap);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->files().size(), 2u);
  // And a single symlinked file opens directly.
  ck = Checkpoint::Open(snap + "/model-2.safetensors");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  EXPECT_EQ(ck->files()[0].resolved_path,
            fs::canonical(root / "blobs/2222").string());
}

TEST(CheckpointIndex, ParseIndexFromBytes) {
  const std::string json =
      "{\"metadata\":{\"total_size\":3,\"x\":[1]},\"extra\":1,"
      "\"weight_map\":{\"b\":\"s2\",\"a\":\"s1\"}}";
  StatusOr<internal::ParsedIndex> r = internal::ParseIndex(Bytes(json), "i");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->weight_map.size(), 2u);
  EXPECT_EQ(r->weight_map.at("a"), "s1");
}

TEST(Checkpoint, ConstructedFromParts) {
  std::vector<FileInfo> files(1);
  files[0].metadata = {{"k", "v"}};
  std::vector<TensorInfo> ts(2);
  ts[0].name = "a";
  ts[0].shape = {2, 3};
  ts[0].size = 6;
  ts[1].name = "b";
  ts[1].size = 1;
  Checkpoint ck(files, ts);
  EXPECT_EQ(ck.total_bytes(), 7u);
  EXPECT_EQ(ck.IndexOf("b"), 1);
  EXPECT_EQ(ck.Find("a")->num_elements(), 6u);
  EXPECT_EQ(ck.Find("b")->num_elements(), 1u);  // 0-rank: one element
  EXPECT_EQ(ck.metadata().at("k"), "v");
  Checkpoint empty({}, {});
  EXPECT_TRUE(empty.metadata().empty());
}

}  // namespace
}  // namespace weightlift
