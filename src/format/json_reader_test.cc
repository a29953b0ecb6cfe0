#include "format/json_reader.h"

#include <gtest/gtest.h>

#include "format/test_util.h"

namespace weightlift::internal {
namespace {

using testing::Bytes;

TEST(Utf8, AcceptsEveryWellFormedLength) {
  size_t bad = 99;
  EXPECT_TRUE(IsValidUtf8(Bytes(""), &bad));
  EXPECT_TRUE(IsValidUtf8(Bytes("ascii"), &bad));
  EXPECT_TRUE(IsValidUtf8(Bytes("\xc3\xa9"), &bad));          // é
  EXPECT_TRUE(IsValidUtf8(Bytes("\xe6\xa8\xa1"), &bad));      // 模
  EXPECT_TRUE(IsValidUtf8(Bytes("\xf0\x9f\x98\x80"), &bad));  // 😀
  EXPECT_TRUE(IsValidUtf8(Bytes("\xf4\x8f\xbf\xbf"), &bad));  // U+10FFFF
  EXPECT_TRUE(IsValidUtf8(Bytes("\xef\xbf\xbf"), &bad));      // U+FFFF
}

TEST(Utf8, RejectsAndLocates) {
  size_t bad = 0;
  EXPECT_FALSE(IsValidUtf8(Bytes("ab\xff"), &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(IsValidUtf8(Bytes("a\xc1\xbf"), &bad));  // overlong 2-byte
  EXPECT_EQ(bad, 1u);
  EXPECT_FALSE(IsValidUtf8(Bytes("\xf0\x8f\xbf\xbf"), &bad));  // overlong 4
  EXPECT_FALSE(IsValidUtf8(Bytes("\xed\xbf\xbf"), &bad));      // surrogate
  EXPECT_FALSE(IsValidUtf8(Bytes("\xf5\x80\x80\x80"), &bad));
  EXPECT_FALSE(IsValidUtf8(Bytes("\xe6\xa8"), &bad));
  EXPECT_FALSE(IsValidUtf8(Bytes("\xe6\x28\xa1"), &bad));
}

TEST(StrictJson, DuplicateKeysAtAnyDepth) {
  JsonError e;
  (void)ParseStrictJson(R"({"a":{"b":[{"c":1,"c":2}]}})", 64, &e);
  EXPECT_EQ(e.rule, FormatError::kDuplicateKey);
  EXPECT_NE(e.message.find("\"c\""), std::string::npos) << e.message;
  (void)ParseStrictJson(R"({"a":{"c":1},"b":{"c":2}})", 64, &e);
  EXPECT_EQ(e.rule, FormatError::kNone) << e.message;
}

TEST(StrictJson, DepthLimitWithoutRecursion) {
  JsonError e;
  std::string deep(200'000, '[');
  (void)ParseStrictJson(deep, 64, &e);
  EXPECT_EQ(e.rule, FormatError::kHeaderBadJson);
  std::string ok = std::string(64, '[') + std::string(64, ']');
  nlohmann::json j = ParseStrictJson(ok, 64, &e);
  EXPECT_EQ(e.rule, FormatError::kNone) << e.message;
  std::string over = std::string(65, '[') + std::string(65, ']');
  (void)ParseStrictJson(over, 64, &e);
  EXPECT_EQ(e.rule, FormatError::kHeaderBadJson);
}

TEST(StrictJson, NumbersKeepTheirKind) {
  JsonError e;
  nlohmann::json j = ParseStrictJson(
      "[18446744073709551615, -1, 1.0, 18446744073709551616]", 64, &e);
  ASSERT_EQ(e.rule, FormatError::kNone) << e.message;
  EXPECT_TRUE(j[0].is_number_unsigned());
  EXPECT_EQ(j[0].get<uint64_t>(), ~uint64_t{0});
  EXPECT_TRUE(j[1].is_number_integer() && !j[1].is_number_unsigned());
  EXPECT_TRUE(j[2].is_number_float());
  EXPECT_TRUE(j[3].is_number_float());
  (void)ParseStrictJson("[1e400]", 64, &e);
  EXPECT_EQ(e.rule, FormatError::kHeaderBadJson);
}

}  // namespace
}  // namespace weightlift::internal
