// The enumerated corpus of broken headers: one or more cases per rule, each
// asserting its own FormatError code.
#include "format/header.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "format/test_util.h"

namespace weightlift::internal {
namespace {

using testing::Bytes;
using testing::Image;
using testing::U64Le;

// One tensor entry: "name":{"dtype":..,"shape":..,"data_offsets":[b,e]}.
std::string E(std::string_view name, std::string_view dtype,
              std::string_view shape, uint64_t b, uint64_t e) {
  return "\"" + std::string(name) + "\":{\"dtype\":\"" + std::string(dtype) +
         "\",\"shape\":" + std::string(shape) + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

std::string Obj(std::string_view body) { return "{" + std::string(body) + "}"; }

std::string Nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

struct BrokenCase {
  std::string name;
  std::string image;
  FormatError want;
  uint64_t max_tensors = kMaxTensors;
};

std::ostream& operator<<(std::ostream& os, const BrokenCase& c) {
  return os << c.name;
}

const std::string kOk = E("a", "F32", "[2]", 0, 8);  // needs 8 data bytes

std::vector<BrokenCase> Corpus() {
  const uint64_t kMax64 = ~uint64_t{0};
  std::vector<BrokenCase> c = {
      // --- framing
      {"empty_file", "", FormatError::kFileTooSmall},
      {"seven_bytes", std::string(7, '\0'), FormatError::kFileTooSmall},
      {"header_len_over_limit", U64Le(100'000'001) + "{}",
       FormatError::kHeaderTooLarge},
      {"header_len_wraps_u64", U64Le(kMax64) + "{}",
       FormatError::kHeaderTooLarge},
      {"header_len_wraps_with_8", U64Le(kMax64 - 7) + "{}",
       FormatError::kHeaderTooLarge},
      {"header_past_eof", U64Le(100) + "{}", FormatError::kHeaderPastEof},
      {"header_one_past_eof", U64Le(3) + "{}", FormatError::kHeaderPastEof},
      // --- UTF-8
      {"utf8_invalid_byte", Image("{\"a\xff\":1}"), FormatError::kHeaderNotUtf8},
      {"utf8_overlong_slash", Image("{\"\xc0\xaf\":1}"),
       FormatError::kHeaderNotUtf8},
      {"utf8_overlong_3byte", Image("{\"\xe0\x80\xaf\":1}"),
       FormatError::kHeaderNotUtf8},
      {"utf8_surrogate", Image("{\"\xed\xa0\x80\":1}"),
       FormatError::kHeaderNotUtf8},
      {"utf8_above_max", Image("{\"\xf4\x90\x80\x80\":1}"),
       FormatError::kHeaderNotUtf8},
      {"utf8_truncated_at_end", Image("{}\xe2\x82"),
       FormatError::kHeaderNotUtf8},
      {"utf8_lone_continuation", Image("{\"\x80\":1}"),
       FormatError::kHeaderNotUtf8},
      // --- JSON syntax
      {"json_empty", Image(""), FormatError::kHeaderBadJson},
      {"json_unclosed", Image("{"), FormatError::kHeaderBadJson},
      {"json_trailing_comma", Image("{\"__metadata__\":{},}"),
       FormatError::kHeaderBadJson},
      {"json_nul_after", Image(std::string("{}\0\0\0\0\0\0", 8)),
       FormatError::kHeaderBadJson},
      {"json_nul_inside", Image(std::string("{\0}", 3)),
       FormatError::kHeaderBadJson},
      {"json_garbage_after", Image("{}  x"), FormatError::kHeaderBadJson},
      {"json_second_value", Image("{}{}"), FormatError::kHeaderBadJson},
      {"json_bom", Image("\xef\xbb\xbf{}"), FormatError::kHeaderBadJson},
      {"json_comment", Image("{/*c*/}"), FormatError::kHeaderBadJson},
      {"json_single_quotes", Image("{'a':1}"), FormatError::kHeaderBadJson},
      {"json_nesting_200000", Image(Nested(200'000)),
       FormatError::kHeaderBadJson},
      {"json_nesting_in_metadata",
       Image(Obj("\"__metadata__\":" + Nested(100'000))),
       FormatError::kHeaderBadJson},
      {"json_nesting_65", Image(Nested(65)), FormatError::kHeaderBadJson},
      {"json_shape_1e400", Image(Obj(E("a", "U8", "[1e400]", 0, 1)), 1),
       FormatError::kHeaderBadJson},
      {"json_lone_surrogate_escape", Image("{\"\\ud800\":1}"),
       FormatError::kHeaderBadJson},
      {"json_raw_control_char", Image("{\"a\tb\":1}"),
       FormatError::kHeaderBadJson},
      // --- top level
      {"top_array", Image("[]"), FormatError::kHeaderNotObject},
      {"top_string", Image("\"x\""), FormatError::kHeaderNotObject},
      {"top_number", Image("3"), FormatError::kHeaderNotObject},
      {"top_null", Image("null"), FormatError::kHeaderNotObject},
      // --- duplicate keys at every level
      {"dup_tensor", Image(Obj(kOk + "," + kOk), 8), FormatError::kDuplicateKey},
      {"dup_field_in_entry",
       Image("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
             "\"data_offsets\":[0,1]}}",
             1),
       FormatError::kDuplicateKey},
      {"dup_key_in_metadata",
       Image("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}"),
       FormatError::kDuplicateKey},
      {"dup_metadata", Image("{\"__metadata__\":{},\"__metadata__\":{}}"),
       FormatError::kDuplicateKey},
      {"dup_escaped_equal", Image(Obj(kOk + "," + E("\\u0061", "F32", "[2]", 8, 16)), 16),
       FormatError::kDuplicateKey},
      // --- entries
      {"entry_array", Image("{\"a\":[]}"), FormatError::kEntryNotObject},
      {"entry_string", Image("{\"a\":\"x\"}"), FormatError::kEntryNotObject},
      {"entry_null", Image("{\"a\":null}"), FormatError::kEntryNotObject},
      {"missing_dtype", Image("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
       FormatError::kMissingField},
      {"missing_shape", Image("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1),
       FormatError::kMissingField},
      {"missing_offsets", Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1),
       FormatError::kMissingField},
      {"unknown_field",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
             "\"extra\":1}}",
             1),
       FormatError::kUnknownField},
      {"dtype_lowercase", Image(Obj(E("a", "bf16", "[1]", 0, 2)), 2),
       FormatError::kBadDtype},
      {"dtype_unknown", Image(Obj(E("a", "F128", "[1]", 0, 16)), 16),
       FormatError::kBadDtype},
      {"dtype_number",
       Image("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,1]}}", 1),
       FormatError::kBadDtype},
      {"shape_negative", Image(Obj(E("a", "U8", "[-1]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_fraction", Image(Obj(E("a", "U8", "[1.5]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_float_integral", Image(Obj(E("a", "U8", "[1.0]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_exponent", Image(Obj(E("a", "U8", "[1e0]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_string", Image(Obj(E("a", "U8", "[\"3\"]", 0, 3)), 3),
       FormatError::kBadShape},
      {"shape_bool", Image(Obj(E("a", "U8", "[true]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_null", Image(Obj(E("a", "U8", "[null]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_2pow64", Image(Obj(E("a", "U8", "[18446744073709551616]", 0, 1)), 1),
       FormatError::kBadShape},
      {"shape_not_array", Image(Obj(E("a", "U8", "3", 0, 3)), 3),
       FormatError::kBadShape},
      {"shape_nested", Image(Obj(E("a", "U8", "[[1]]", 0, 1)), 1),
       FormatError::kBadShape},
      {"offsets_one",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1),
       FormatError::kBadOffsets},
      {"offsets_three",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}",
             1),
       FormatError::kBadOffsets},
      {"offsets_negative",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}",
             1),
       FormatError::kBadOffsets},
      {"offsets_float",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.0]}}",
             1),
       FormatError::kBadOffsets},
      {"offsets_string",
       Image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":\"0,1\"}}",
             1),
       FormatError::kBadOffsets},
      {"offsets_reversed", Image(Obj(E("a", "U8", "[1]", 1, 0)), 1),
       FormatError::kBadOffsets},
      {"rank_65",
       Image(Obj(E("a", "U8", "[" + [] {
                   std::string s = "1";
                   for (int i = 1; i < 65; ++i) s += ",1";
                   return s;
                 }() + "]", 0, 1)), 1),
       FormatError::kRankTooLarge},
      {"count_overflow",
       Image(Obj(E("a", "U8", "[4294967296,4294967296]", 0, 1)), 1),
       FormatError::kSizeOverflow},
      {"count_overflow_before_zero",
       Image(Obj(E("a", "U8", "[4294967296,4294967296,0]", 0, 0))),
       FormatError::kSizeOverflow},
      {"bits_overflow",
       Image(Obj(E("a", "F32", "[4611686018427387904]", 0, 1)), 1),
       FormatError::kSizeOverflow},
      {"f4_odd", Image(Obj(E("a", "F4", "[3]", 0, 2)), 2),
       FormatError::kSubByteMisaligned},
      {"f6_one", Image(Obj(E("a", "F6_E2M3", "[1]", 0, 1)), 1),
       FormatError::kSubByteMisaligned},
      {"f6_two", Image(Obj(E("a", "F6_E3M2", "[2,1]", 0, 2)), 2),
       FormatError::kSubByteMisaligned},
      {"size_too_small", Image(Obj(E("a", "F32", "[2]", 0, 4)), 4),
       FormatError::kSizeMismatch},
      {"size_too_big", Image(Obj(E("a", "BF16", "[2]", 0, 6)), 6),
       FormatError::kSizeMismatch},
      {"size_zero_for_scalar", Image(Obj(E("a", "F64", "[]", 0, 0))),
       FormatError::kSizeMismatch},
      // --- ranges
      {"first_not_at_zero", Image(Obj(E("a", "U8", "[1]", 4, 5)), 5),
       FormatError::kRangeGap},
      {"gap_between",
       Image(Obj(E("a", "U8", "[1]", 0, 1) + "," + E("b", "U8", "[1]", 2, 3)), 3),
       FormatError::kRangeGap},
      {"overlap",
       Image(Obj(E("a", "U8", "[4]", 0, 4) + "," + E("b", "U8", "[4]", 2, 6)), 6),
       FormatError::kRangeOverlap},
      {"same_range_twice",
       Image(Obj(E("a", "U8", "[4]", 0, 4) + "," + E("b", "U8", "[4]", 0, 4)), 4),
       FormatError::kRangeOverlap},
      {"contained",
       Image(Obj(E("a", "U8", "[8]", 0, 8) + "," + E("b", "U8", "[2]", 2, 4)), 8),
       FormatError::kRangeOverlap},
      // --- file end
      {"trailing_byte", Image(Obj(kOk), 9), FormatError::kTrailingBytes},
      {"trailing_after_empty_header", Image("{}", 1), FormatError::kTrailingBytes},
      {"data_short", Image(Obj(kOk), 7), FormatError::kDataPastEof},
      {"data_missing", Image(Obj(kOk)), FormatError::kDataPastEof},
      // Offsets near 2^64 can only match a shape whose bit count overflows
      // (the reference sizes tensors in bits too), so the wrap of
      // 8 + N + end is caught as an overflow or as a size mismatch first.
      {"offset_near_2pow64",
       Image(Obj(E("a", "U8", "[18446744073709551615]", 0, kMax64)), 1),
       FormatError::kSizeOverflow},
      {"offset_near_2pow64_small_shape",
       Image(Obj(E("a", "U8", "[1]", 0, kMax64)), 1),
       FormatError::kSizeMismatch},
      {"second_offset_near_2pow64",
       Image(Obj(E("a", "U8", "[1]", 0, 1) + "," +
                 E("b", "U8", "[1]", kMax64 - 1, kMax64)),
             2),
       FormatError::kRangeGap},
      {"largest_tensor_past_eof",
       Image(Obj(E("a", "U8", "[2305843009213693951]", 0,
                   2305843009213693951ull)),
             1),
       FormatError::kDataPastEof},
      // --- metadata
      {"metadata_int_value", Image("{\"__metadata__\":{\"a\":1}}"),
       FormatError::kBadMetadata},
      {"metadata_null_value", Image("{\"__metadata__\":{\"a\":null}}"),
       FormatError::kBadMetadata},
      {"metadata_object_value", Image("{\"__metadata__\":{\"a\":{}}}"),
       FormatError::kBadMetadata},
      {"metadata_array", Image("{\"__metadata__\":[]}"),
       FormatError::kBadMetadata},
      {"metadata_string", Image("{\"__metadata__\":\"x\"}"),
       FormatError::kBadMetadata},
      {"metadata_null", Image("{\"__metadata__\":null}"),
       FormatError::kBadMetadata},
      // --- names and counts
      {"empty_name", Image(Obj(E("", "U8", "[1]", 0, 1)), 1),
       FormatError::kEmptyName},
  };
  BrokenCase many{
      "too_many_tensors",
      Image(Obj(E("a", "U8", "[1]", 0, 1) + "," + E("b", "U8", "[1]", 1, 2) +
                "," + E("c", "U8", "[1]", 2, 3)),
            3),
      FormatError::kTooManyTensors, 2};
  c.push_back(many);
  return c;
}

class BrokenHeaderTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenHeaderTest, FailsWithItsRule) {
  const BrokenCase& c = GetParam();
  ParseLimits limits;
  limits.max_tensors = c.max_tensors;
  StatusOr<ParsedHeader> r =
      ParseFileImage(Bytes(c.image), "bad.safetensors", limits);
  ASSERT_FALSE(r.ok()) << c.name;
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().rule(), c.want)
      << "got " << FormatErrorName(r.status().rule()) << ": "
      << r.status().message();
  // Every message names the file.
  EXPECT_NE(r.status().message().find("bad.safetensors"), std::string::npos)
      << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(Corpus, BrokenHeaderTest,
                         ::testing::ValuesIn(Corpus()),
                         [](const ::testing::TestParamInfo<BrokenCase>& info) {
                           return info.param.name;
                         });

TEST(BrokenHeaderCorpus, CoversEveryHeaderRule) {
  std::set<FormatError> seen;
  for (const BrokenCase& c : Corpus()) seen.insert(c.want);
  for (int code = 1; code <= 24; ++code) {
    EXPECT_TRUE(seen.count(static_cast<FormatError>(code)))
        << "no case for " << FormatErrorName(static_cast<FormatError>(code));
  }
}

TEST(ParseHeader, MessagesNameTensorAndOffsets) {
  const std::string img = Image(Obj(E("layer.0.w", "U8", "[4]", 0, 4) + "," +
                                    E("layer.1.w", "U8", "[4]", 2, 6)),
                                6);
  StatusOr<ParsedHeader> r = ParseFileImage(Bytes(img), "m.safetensors");
  ASSERT_FALSE(r.ok());
  const std::string m = r.status().message();
  EXPECT_NE(m.find("m.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("layer.1.w"), std::string::npos) << m;
  EXPECT_NE(m.find("layer.0.w"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 6]"), std::string::npos) << m;
  EXPECT_NE(r.status().ToString().find("range_overlap"), std::string::npos);
}

TEST(ParseHeader, LengthMismatchIsCallerError) {
  const std::string json = "{}";
  StatusOr<ParsedHeader> r = ParseHeader(Bytes(json), 3, 11, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(ParseHeader, AcceptsTrailingJsonWhitespace) {
  for (std::string pad : {"        ", " \t\r\n", "\n"}) {
    const std::string img = Image(Obj(kOk) + pad, 8);
    StatusOr<ParsedHeader> r = ParseFileImage(Bytes(img), "x");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tensors.size(), 1u);
    EXPECT_EQ(r->data_offset, 8 + Obj(kOk).size() + pad.size());
  }
}

TEST(ParseHeader, ValidEdgeCases) {
  // Empty tensors share offsets with their neighbours; 0-rank is 1 element.
  const std::string header = Obj(
      "\"__metadata__\":{\"format\":\"pt\",\"\":\"\"}," +
      E("scalar", "F64", "[]", 0, 8) + "," + E("empty", "F32", "[0]", 8, 8) +
      "," + E("empty2", "BF16", "[3,0,5]", 8, 8) + "," +
      E("f4", "F4", "[2,3]", 8, 11) + "," + E("f6", "F6_E2M3", "[4]", 11, 14) +
      "," + E("zero_at_end", "U8", "[0]", 14, 14));
  const std::string img = Image(header, 14);
  StatusOr<ParsedHeader> r = ParseFileImage(Bytes(img), "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tensors.size(), 6u);
  EXPECT_EQ(r->tensors[0].name, "scalar");
  EXPECT_TRUE(r->tensors[0].shape.empty());
  EXPECT_EQ(r->tensors[1].name, "empty");  // sorted (begin, end, name)
  EXPECT_EQ(r->tensors[2].name, "empty2");
  EXPECT_EQ(r->tensors[3].dtype, DType::kF4);
  EXPECT_EQ(r->tensors[4].dtype, DType::kF6_E2M3);
  EXPECT_EQ(r->metadata.at("format"), "pt");
  EXPECT_EQ(r->metadata.at(""), "");
  EXPECT_EQ(r->header_size, header.size());
  EXPECT_EQ(r->file_size, img.size());
}

TEST(ParseHeader, EmptyHeaderAndDepthAtLimit) {
  const std::string img = Image("{}");
  EXPECT_TRUE(ParseFileImage(Bytes(img), "x").ok());
  // Depth 64 is allowed (metadata is the object at level 1, so the nesting
  // inside it may use 63 more levels before being rejected as bad metadata).
  const std::string deep = Image("{\"__metadata__\":" + Nested(63) + "}");
  StatusOr<ParsedHeader> r = ParseFileImage(Bytes(deep), "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().rule(), FormatError::kBadMetadata);
}

TEST(TensorBytes, EveryDtype) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    const int bits = DTypeBits(d);
    const uint64_t n = 24;  // a multiple of 8 / gcd(bits, 8) for every dtype
    StatusOr<uint64_t> b = TensorBytes(std::vector<uint64_t>{n}, d, "t");
    ASSERT_TRUE(b.ok()) << DTypeName(d);
    EXPECT_EQ(*b, n * bits / 8) << DTypeName(d);
  }
}

}  // namespace
}  // namespace weightlift::internal
