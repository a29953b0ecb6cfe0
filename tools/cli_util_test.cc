#include "cli_util.h"

#include <gtest/gtest.h>

#include "sha256.h"

namespace weightlift::cli {
namespace {

TEST(ExitCodes, Mapping) {
  EXPECT_EQ(ExitCodeFor(StatusCode::kOk), 0);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInvalidArgument), 2);
  EXPECT_EQ(ExitCodeFor(StatusCode::kCorruption), 3);
  EXPECT_EQ(ExitCodeFor(StatusCode::kIoError), 4);
  EXPECT_EQ(ExitCodeFor(StatusCode::kUnsupported), 5);
  EXPECT_EQ(ExitCodeFor(StatusCode::kNotFound), 6);
  EXPECT_EQ(ExitCodeFor(StatusCode::kCudaError), 1);
  EXPECT_EQ(ExitCodeFor(StatusCode::kResourceExhausted), 1);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInternal), 1);
  for (int code = 0; code <= 6; ++code) {
    EXPECT_NE(
        std::string(kExitCodesHelp).find("  " + std::to_string(code) + "  "),
        std::string::npos);
  }
}

TEST(Printable, EscapesControlCharacters) {
  EXPECT_EQ(Printable("a.b"), "a.b");
  EXPECT_EQ(Printable("a\nb\x1b[2J"), "a\\x0ab\\x1b[2J");
  EXPECT_EQ(Printable("\x7f"), "\\x7f");
  EXPECT_EQ(Printable("ü"), "ü");  // UTF-8 passes through
}

TEST(Sha256SumLine, EscapesLikeCoreutils) {
  EXPECT_EQ(Sha256SumLine("ab", "w"), "ab  w");
  EXPECT_EQ(Sha256SumLine("ab", "a\nb"), "\\ab  a\\nb");
  EXPECT_EQ(Sha256SumLine("ab", "a\\b"), "\\ab  a\\\\b");
}

TEST(Sha256, KnownDigests) {
  if (!Sha256Available()) {
    StatusOr<std::unique_ptr<Sha256>> h = Sha256::Create();
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), StatusCode::kUnsupported);
    GTEST_SKIP() << "built without libcrypto";
  }
  auto h = Sha256::Create();
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*(*h)->FinishHex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  ASSERT_TRUE((*h)->Reset().ok());
  ASSERT_TRUE((*h)->Update("a", 1).ok());
  ASSERT_TRUE((*h)->Update("bc", 2).ok());
  EXPECT_EQ(*(*h)->FinishHex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(MakeLoadOptions, ParsesAndValidates) {
  LoadFlags f;
  f.device = "cpu";
  f.backend = "uring";
  f.gds = "off";
  f.threads = 3;
  f.chunk = "4M";
  f.staging = "64MiB";
  StatusOr<LoadOptions> o = MakeLoadOptions(f);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->backend, Backend::kUring);
  EXPECT_EQ(o->gds, GdsMode::kOff);
  EXPECT_EQ(o->threads, 3);
  EXPECT_EQ(o->chunk_bytes, 4u << 20);
  EXPECT_EQ(o->cuda_chunk_bytes, 4u << 20);  // SetLoadOption's one mapping
  EXPECT_EQ(o->staging_bytes, 64u << 20);

  LoadFlags bad = f;
  bad.device = "tpu";
  EXPECT_EQ(MakeLoadOptions(bad).status().code(), StatusCode::kInvalidArgument);
  bad = f;
  bad.threads = -1;
  EXPECT_EQ(MakeLoadOptions(bad).status().code(), StatusCode::kInvalidArgument);
  bad = f;
  bad.chunk = "1G";  // larger than the staging memory
  EXPECT_EQ(MakeLoadOptions(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(OpenCheckpoint, MissingPathIsNotFound) {
  StatusOr<Checkpoint> c = OpenCheckpoint("/nonexistent/weightlift/x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/weightlift/x"),
            std::string::npos);
}

}  // namespace
}  // namespace weightlift::cli
