#include "weightlift/dtype.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "weightlift/format_error.h"

namespace weightlift {
namespace {

TEST(DType, NamesRoundTripInEnumOrder) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    std::optional<DType> back = ParseDType(DTypeName(d));
    ASSERT_TRUE(back.has_value()) << DTypeName(d);
    EXPECT_EQ(*back, d);
    if (i > 1) {  // after BOOL, bits never decrease in enum order
      EXPECT_GE(DTypeBits(d), DTypeBits(static_cast<DType>(i - 1)));
    }
  }
  EXPECT_EQ(DTypeBits(DType::kF4), 4);
  EXPECT_EQ(DTypeBits(DType::kF6_E3M2), 6);
  EXPECT_EQ(DTypeBits(DType::kBF16), 16);
  EXPECT_EQ(DTypeBits(DType::kC64), 64);
  EXPECT_FALSE(ParseDType("bf16").has_value());
  EXPECT_FALSE(ParseDType("").has_value());
  EXPECT_FALSE(ParseDType("BF16 ").has_value());
}

TEST(FormatError, NamesAreSnakeCase) {
  EXPECT_STREQ(FormatErrorName(FormatError::kRangeOverlap), "range_overlap");
  EXPECT_STREQ(FormatErrorName(FormatError::kIndexUnsafePath),
               "index_unsafe_path");
  for (int i = 1; i <= 38; ++i) {
    std::string n = FormatErrorName(static_cast<FormatError>(i));
    for (char c : n) EXPECT_TRUE(islower(c) || c == '_' || isdigit(c)) << n;
  }
}

}  // namespace
}  // namespace weightlift
