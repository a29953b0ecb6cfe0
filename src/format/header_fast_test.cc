// ParseEntriesFast against ParseEntriesStrict (the reference): on headers
// as writers write them the fast reader answers, and on every header,
// plain, unusual or broken (random headers and random mutations of them),
// whatever it accepts the strict reader accepts with the same tensors and
// metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "format/header.h"
#include "format/json_reader.h"

namespace weightlift::internal {
namespace {

// H's contents in a comparable order (the readers fill tensors in the
// order they meet them: file order and the DOM's key order differ).
std::vector<
    std::tuple<std::string, int, std::vector<uint64_t>, uint64_t, uint64_t>>
Sorted(const ParsedHeader& h) {
  std::vector<
      std::tuple<std::string, int, std::vector<uint64_t>, uint64_t, uint64_t>>
      out;
  for (const ParsedTensor& t : h.tensors) {
    out.emplace_back(t.name, static_cast<int>(t.dtype), t.shape, t.begin,
                     t.end);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One random header: tensors back to back, maybe metadata, keys in random
// order, random whitespace; names now and then with an escape or a
// multi-byte character, dtypes now and then unknown, offsets now and then
// wrong.
std::string RandomHeader(std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  auto ws = [&]() -> std::string {
    static const char* kSpace[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
    return kSpace[pick(7)];
  };
  static const char* kDtypes[] = {"F32",     "BF16", "F16", "I64", "U8",
                                  "F8_E4M3", "BOOL", "F64", "f32", "F4"};
  static const int kBits[] = {32, 16, 16, 64, 8, 8, 8, 64, 32, 4};
  std::vector<std::string> members;
  const int tensors = pick(6);
  uint64_t offset = 0;
  for (int i = 0; i < tensors; ++i) {
    std::string name = "t" + std::to_string(pick(8));  // repeats happen
    switch (pick(10)) {
      case 0:
        name += "\\u00e9";
        break;  // an escape
      case 1:
        name += "\xc3\xa9";
        break;  // é as raw UTF-8
      case 2:
        name = "";
        break;  // empty
      case 3:
        name = "__metadata__";
        break;
      default:
        break;
    }
    const int d = pick(10);
    std::vector<uint64_t> shape(pick(4));
    uint64_t elements = 1;
    for (uint64_t& x : shape) {
      x = static_cast<uint64_t>(pick(5));
      elements *= x;
    }
    const uint64_t bytes = elements * kBits[d] / 8;
    uint64_t end = offset + bytes + (pick(12) == 0 ? 1 : 0);
    std::vector<std::string> fields;
    fields.push_back("\"dtype\"" + ws() + ":" + ws() + "\"" + kDtypes[d] +
                     "\"");
    std::string sh = "[";
    for (size_t k = 0; k < shape.size(); ++k) {
      sh += (k ? "," + ws() : ws()) + std::to_string(shape[k]);
    }
    fields.push_back("\"shape\":" + ws() + sh + ws() + "]");
    fields.push_back("\"data_offsets\":[" + std::to_string(offset) + "," +
                     ws() + std::to_string(end) + "]");
    if (pick(15) == 0) fields.pop_back();                 // missing
    if (pick(15) == 0) fields.push_back("\"extra\":1");   // unknown
    if (pick(15) == 0) fields.push_back(fields.front());  // repeated
    std::shuffle(fields.begin(), fields.end(), rng);
    std::string entry = "{" + ws();
    for (size_t k = 0; k < fields.size(); ++k) {
      entry += (k ? "," + ws() : "") + fields[k];
    }
    members.push_back("\"" + name + "\"" + ws() + ":" + ws() + entry + ws() +
                      "}");
    offset = end;
  }
  if (pick(2) == 0) {
    std::string meta = "{";
    const int n = pick(3);
    for (int k = 0; k < n; ++k) {
      meta += (k ? "," : "") + std::string("\"k") + std::to_string(pick(3)) +
              "\":\"v" + (pick(6) == 0 ? "\\n" : "") + "\"";
    }
    members.push_back("\"__metadata__\":" + ws() + meta + "}");
  }
  std::shuffle(members.begin(), members.end(), rng);
  std::string out = ws() + "{" + ws();
  for (size_t k = 0; k < members.size(); ++k) {
    out += (k ? "," + ws() : "") + members[k];
  }
  return out + ws() + "}" + ws();
}

// TEXT with 1-3 random edits: a byte replaced, inserted or deleted, or a
// piece repeated.
std::string Mutate(std::string text, std::mt19937_64& rng) {
  static const std::string kChars = "\"{}[],:0123456789-.eE \t\n\\uaF";
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    const char c = kChars[rng() % kChars.size()];
    switch (rng() % 4) {
      case 0:
        text[at] = c;
        break;
      case 1:
        text.insert(text.begin() + at, c);
        break;
      case 2:
        text.erase(at, 1);
        break;
      default:
        text.insert(at, text.substr(at, 1 + rng() % 12));
        break;
    }
  }
  return text;
}

// Checks the property on TEXT; returns whether the fast reader answered.
bool Agree(const std::string& text, const ParseLimits& limits = {}) {
  size_t bad;
  if (!IsValidUtf8(
          std::span<const std::byte>(
              reinterpret_cast<const std::byte*>(text.data()), text.size()),
          &bad)) {
    return false;  // ParseHeader refuses it before either reader
  }
  ParsedHeader fast, strict;
  const bool answered = ParseEntriesFast(text, limits, &fast);
  const Status s = ParseEntriesStrict(text, "f", limits, &strict);
  if (!answered) return false;
  EXPECT_TRUE(s.ok()) << "fast accepted what strict refuses: " << text << "\n"
                      << s.ToString();
  if (!s.ok()) return true;
  EXPECT_EQ(Sorted(fast), Sorted(strict)) << text;
  EXPECT_EQ(fast.metadata, strict.metadata) << text;
  EXPECT_EQ(fast.has_metadata, strict.has_metadata) << text;
  return true;
}

TEST(HeaderFastTest, AnswersForTheHeadersWritersWrite) {
  // safetensors' own layout: metadata first, no spaces.
  const std::string plain =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[24,26]},"
      "\"\xc3\xa9t\":{\"dtype\":\"I64\",\"shape\":[0,4],"
      "\"data_offsets\":[26,26]}}";
  EXPECT_TRUE(Agree(plain));
  // Spaced out, fields in another order, no metadata, empty.
  EXPECT_TRUE(
      Agree(" {\n \"x\" : { \"shape\" : [ 4 ] , \"data_offsets\""
            " : [ 0 , 4 ], \"dtype\" : \"U8\" } } \n"));
  EXPECT_TRUE(Agree("{}"));
  EXPECT_TRUE(Agree("{\"__metadata__\":{}}"));
}

TEST(HeaderFastTest, LeavesWhatIsNotPlainToTheStrictReader) {
  ParsedHeader h;
  for (const std::string& text : {
           // valid, but not plain: an escape in a name or in metadata
           std::string("{\"a\\u00e9\":{\"dtype\":\"U8\",\"shape\":[1],"
                       "\"data_offsets\":[0,1]}}"),
           std::string("{\"__metadata__\":{\"k\":\"a\\nb\"}}"),
           // broken: a float, a negative, a leading zero, a repeated key,
           // a size that does not match, trailing text, a repeated name
           std::string("{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],"
                       "\"data_offsets\":[0,1]}}"),
           std::string("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],"
                       "\"data_offsets\":[0,1]}}"),
           std::string("{\"a\":{\"dtype\":\"U8\",\"shape\":[01],"
                       "\"data_offsets\":[0,1]}}"),
           std::string("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\","
                       "\"shape\":[1],\"data_offsets\":[0,1]}}"),
           std::string("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
                       "\"data_offsets\":[0,1]}}"),
           std::string("{} x"),
           std::string("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                       "\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\","
                       "\"shape\":[1],\"data_offsets\":[1,2]}}"),
       }) {
    h = ParsedHeader{};
    EXPECT_FALSE(ParseEntriesFast(text, {}, &h)) << text;
    Agree(text);
  }
  // The tensor limit: declined at the limit, the strict reader names it.
  const std::string two =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
  ParseLimits one;
  one.max_tensors = 1;
  h = ParsedHeader{};
  EXPECT_FALSE(ParseEntriesFast(two, one, &h));
  EXPECT_FALSE(ParseEntriesStrict(two, "f", one, &h).ok());
}

TEST(HeaderFastTest, AcceptsOnlyWhatTheStrictReaderAcceptsAlike) {
  std::mt19937_64 rng(20261203);
  int answered = 0, declined = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = RandomHeader(rng);
    if (i % 2 == 1) text = Mutate(std::move(text), rng);
    (Agree(text) ? answered : declined) += 1;
    if (HasFailure()) break;
  }
  // Both sides of the property were exercised.
  EXPECT_GT(answered, 2000);
  EXPECT_GT(declined, 2000);
}

}  // namespace
}  // namespace weightlift::internal
