#include "weightlift/byte_size.h"

#include <gtest/gtest.h>

namespace weightlift {
namespace {

uint64_t Parsed(const char* text) {
  StatusOr<uint64_t> v = ParseByteSize(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : 0;
}

TEST(ParseByteSize, BinaryUnitsWithOrWithoutTheIecSpelling) {
  EXPECT_EQ(Parsed("8M"), 8ull << 20);
  EXPECT_EQ(Parsed("8MiB"), 8ull << 20);
  EXPECT_EQ(Parsed("8Mi"), 8ull << 20);
  EXPECT_EQ(Parsed("8m"), 8ull << 20);
  EXPECT_EQ(Parsed("8mib"), 8ull << 20);
  EXPECT_EQ(Parsed("64k"), 64ull << 10);
  EXPECT_EQ(Parsed("1G"), 1ull << 30);
  EXPECT_EQ(Parsed("2TiB"), 2ull << 40);
}

TEST(ParseByteSize, DecimalUnitsAreSi) {
  EXPECT_EQ(Parsed("8MB"), 8000000u);
  EXPECT_EQ(Parsed("8mb"), 8000000u);
  EXPECT_EQ(Parsed("4kB"), 4000u);
  EXPECT_EQ(Parsed("1GB"), 1000000000u);
  EXPECT_EQ(Parsed("3TB"), 3000000000000u);
}

TEST(ParseByteSize, PlainBytesSpacesAndFractions) {
  EXPECT_EQ(Parsed("4194304"), 4194304u);
  EXPECT_EQ(Parsed("4096B"), 4096u);
  EXPECT_EQ(Parsed("0"), 0u);
  EXPECT_EQ(Parsed(" 16 MiB "), 16ull << 20);
  EXPECT_EQ(Parsed("1.5G"), 3ull << 29);
  EXPECT_EQ(Parsed("0.5K"), 512u);
  EXPECT_EQ(Parsed("2.5MB"), 2500000u);
  EXPECT_EQ(Parsed("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Parsed("16777215T"), 16777215ull << 40);  // the largest in T
}

TEST(ParseByteSize, RejectsWithTheTextAndTheReason) {
  const struct {
    const char* text;
    const char* why;
  } cases[] = {
      {"", "no number"},
      {"M", "no number"},
      {"lots", "no number"},
      {"-1", "no number"},
      {".5M", "no number"},
      {"8X", "unknown unit"},
      {"8MiBs", "unknown unit"},
      {"8iB", "unknown unit"},
      {"8 M B", "unknown unit"},
      {"1.", "no digits after the decimal point"},
      {"1.1K", "not a whole number of bytes"},
      {"0.3B", "not a whole number of bytes"},
      {"18446744073709551616", "too large"},
      {"16777216T", "too large"},
      {"99999999999999999999G", "too large"},
      {"17179869183.99G", "not a whole number"},
  };
  for (const auto& c : cases) {
    StatusOr<uint64_t> v = ParseByteSize(c.text);
    ASSERT_FALSE(v.ok()) << c.text << " gave " << *v;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    const std::string m = v.status().message();
    EXPECT_NE(m.find(std::string("'") + c.text + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << c.text << ": " << m;
  }
}

TEST(FormatByteSize, BinaryUnitsTwoDecimals) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(1024), "1.00 KiB");
  EXPECT_EQ(FormatByteSize(8ull << 20), "8.00 MiB");
  EXPECT_EQ(FormatByteSize(13476839424ull), "12.55 GiB");
  EXPECT_EQ(FormatByteSize(UINT64_MAX), "16.00 EiB");
}

TEST(ByteSize, FormatThenParseRoundTripsWholeUnits) {
  for (uint64_t v : {1ull << 10, 3ull << 20, 5ull << 30, 7ull << 40}) {
    std::string text = FormatByteSize(v);  // "3.00 MiB"
    EXPECT_EQ(Parsed(text.c_str()), v) << text;
  }
}

}  // namespace
}  // namespace weightlift
