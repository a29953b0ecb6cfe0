// ParseIndex, which reads model.safetensors.index.json from SAX events
// without building a DOM, against an oracle that does build one (the strict
// DOM reader, ParseStrictJson) and checks the index rules on it, as
// ParseIndex itself did until session 9. On thousands of mutated indexes
// both must accept the same inputs with the same weight_map, and refuse the
// rest under the same rule. Which bad entry is named may differ: the SAX
// reader reports the first in the file, the DOM the first in key order, so
// the two entry rules (a non-string value, an unsafe shard name) count as
// one class here.
#include "format/index.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "format/json_reader.h"
#include "format/test_util.h"
#include "weightlift/format_error.h"

namespace weightlift {
namespace {

using internal::testing::Bytes;

struct Outcome {
  FormatError rule = FormatError::kNone;  // kNone: accepted
  std::map<std::string, std::string> weight_map;
};

FormatError Class(FormatError rule) {
  return rule == FormatError::kIndexUnsafePath ? FormatError::kIndexBadEntry
                                               : rule;
}

Outcome Sax(const std::string& text) {
  Outcome o;
  StatusOr<internal::ParsedIndex> p = internal::ParseIndex(Bytes(text), "i");
  if (p.ok()) {
    o.weight_map = p->weight_map;
  } else {
    o.rule = Class(p.status().rule());
  }
  return o;
}

// The rules on a DOM, in the order ParseIndex checked them before.
Outcome Dom(const std::string& text) {
  Outcome o;
  size_t bad = 0;
  if (!internal::IsValidUtf8(Bytes(text), &bad)) {
    o.rule = FormatError::kIndexBadJson;
    return o;
  }
  internal::JsonError err;
  nlohmann::json root = internal::ParseStrictJson(text, kMaxJsonDepth, &err);
  if (err.rule != FormatError::kNone) {
    o.rule = err.rule == FormatError::kDuplicateKey
                 ? FormatError::kDuplicateKey
                 : FormatError::kIndexBadJson;
    return o;
  }
  if (!root.is_object() ||
      (root.contains("metadata") && !root["metadata"].is_object())) {
    o.rule = FormatError::kIndexBadJson;
    return o;
  }
  if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
    o.rule = FormatError::kIndexNoWeightMap;
    return o;
  }
  for (const auto& [tensor, shard] : root["weight_map"].items()) {
    if (tensor.empty() || !shard.is_string() ||
        !internal::IsSafeShardName(shard.get<std::string>())) {
      o.rule = FormatError::kIndexBadEntry;
      o.weight_map.clear();
      return o;
    }
    o.weight_map.emplace(tensor, shard.get<std::string>());
  }
  if (o.weight_map.empty()) o.rule = FormatError::kIndexNoWeightMap;
  return o;
}

const char kBase[] =
    "{\"metadata\": {\"total_size\": 123, \"format\": \"pt\", \"x\": [1, "
    "{\"y\": null}]},\n \"weight_map\": {\"a.bias\": \"model-1.safetensors\", "
    "\"a.weight\": \"model-1.safetensors\", \"b\": \"sub/model-2.safetensors\","
    " \"c\\u00e9\": \"model-2.safetensors\"}, \"extra\": [true, 1.5e3]}";

TEST(IndexReader, MatchesTheDomRulesOnMutatedIndexes) {
  const std::string base = kBase;
  ASSERT_EQ(Sax(base).rule, FormatError::kNone);
  ASSERT_EQ(Sax(base).weight_map, Dom(base).weight_map);
  const std::string alphabet = "{}[]\":,\\ 0a.-/tnue\x01\xc3";
  std::mt19937 rng(20261203);
  int refused = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:  // replace a byte
          s[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:  // delete a run
          s.erase(at, 1 + rng() % 6);
          break;
        case 2:  // insert a byte
          s.insert(s.begin() + static_cast<long>(at),
                   alphabet[rng() % alphabet.size()]);
          break;
        default: {  // repeat a span (duplicate keys, deeper nesting)
          const size_t len = 1 + rng() % 40;
          s.insert(at, s.substr(at, len));
        }
      }
      if (s.empty()) s = "{";
    }
    SCOPED_TRACE(s);
    const Outcome sax = Sax(s), dom = Dom(s);
    ASSERT_EQ(sax.rule, dom.rule);
    ASSERT_EQ(sax.weight_map, dom.weight_map);
    refused += sax.rule != FormatError::kNone;
  }
  // Mutations must exercise refusals and acceptances both.
  EXPECT_GT(refused, 1000);
  EXPECT_LT(refused, 6000);
}

// The fast path takes what writers write (here HF's layout: indented,
// sorted, total_size, several shards) and declines the rest; wherever it
// accepts a mutated index, the strict reader accepts it with the same map.
TEST(IndexReader, FastPathTakesWriterOutputAndAgreesWhereItAccepts) {
  std::string hf =
      "{\n  \"metadata\": {\n    \"total_size\": 13476839424\n"
      "  },\n  \"weight_map\": {\n";
  for (int i = 0; i < 300; ++i) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "    \"model.layers.%03d.weight\": "
                  "\"model-%05d-of-00002.safetensors\"%s\n",
                  i, 1 + i / 150, i + 1 < 300 ? "," : "");
    hf += line;
  }
  hf += "  }\n}\n";
  std::optional<internal::ParsedIndex> fast = internal::ParseIndexFast(hf);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(fast->weight_map.size(), 300u);
  EXPECT_EQ(fast->weight_map, Dom(hf).weight_map);
  // Declined, left to the strict reader: extra keys, escapes, floats,
  // nested metadata, unsafe or empty names, repeats, nothing in the map.
  for (const char* text :
       {R"({"weight_map": {"a": "s"}, "extra": 1})",
        R"({"weight_map": {"a\u0041": "s"}})",
        R"({"metadata": {"x": 1.5}, "weight_map": {"a": "s"}})",
        R"({"metadata": {"x": {}}, "weight_map": {"a": "s"}})",
        R"({"weight_map": {"a": "../s"}})", R"({"weight_map": {"": "s"}})",
        R"({"weight_map": {"a": "s", "a": "s"}})", R"({"weight_map": {}})",
        R"({"metadata": {"k": "1", "k": "2"}, "weight_map": {"a": "s"}})"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(internal::ParseIndexFast(text).has_value());
  }
  // Mutations of a small one: where the fast path still accepts, the
  // strict reader must agree.
  const std::string small =
      "{\"metadata\": {\"total_size\": 1234, \"format\": \"pt\"},\n"
      " \"weight_map\": {\"a.weight\": \"m-1.safetensors\", \"b\": "
      "\"sub/m-2.safetensors\", \"c.bias\": \"m-1.safetensors\"}}";
  ASSERT_TRUE(internal::ParseIndexFast(small).has_value());
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = small;
    const size_t at = rng() % m.size();
    static constexpr char kAlphabet[] = "{}[]\":,\\ 0a./\x01";
    m[at] = kAlphabet[rng() % (sizeof kAlphabet - 1)];
    std::optional<internal::ParsedIndex> f = internal::ParseIndexFast(m);
    if (!f) continue;
    ++accepted;
    SCOPED_TRACE(m);
    const Outcome dom = Dom(m);
    ASSERT_EQ(dom.rule, FormatError::kNone);
    ASSERT_EQ(f->weight_map, dom.weight_map);
  }
  EXPECT_GT(accepted, 100);  // mutations inside names and whitespace
}

// Keys in any order give the same map; a repeated key is refused whether it
// repeats the latest key, an earlier one, or comes after the map was
// appended to in sorted order.
TEST(IndexReader, KeyOrderAndDuplicates) {
  const auto idx = [](const std::string& entries) {
    return "{\"weight_map\": {" + entries + "}}";
  };
  const Outcome sorted = Sax(idx(R"("a":"s1","b":"s2","c":"s1")"));
  const Outcome shuffled = Sax(idx(R"("c":"s1","a":"s1","b":"s2")"));
  ASSERT_EQ(sorted.rule, FormatError::kNone);
  EXPECT_EQ(sorted.weight_map, shuffled.weight_map);
  EXPECT_EQ(sorted.weight_map.size(), 3u);
  for (const char* dup :
       {R"("a":"s1","a":"s1")", R"("a":"s1","b":"s1","a":"s2")",
        R"("b":"s1","a":"s1","b":"s1")"}) {
    SCOPED_TRACE(dup);
    EXPECT_EQ(Sax(idx(dup)).rule, FormatError::kDuplicateKey);
  }
  StatusOr<internal::ParsedIndex> p =
      internal::ParseIndex(Bytes(idx(R"("a":"s1","b":"s1","a":"s2")")), "i");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(
                "duplicate key \"a\" in the value of \"weight_map\""),
            std::string::npos)
      << p.status().ToString();
}

// A semantic problem does not hide a later syntax error or duplicate key,
// as with the DOM, which was complete before any rule was checked.
TEST(IndexReader, SyntaxAndDuplicatesTakePrecedence) {
  EXPECT_EQ(Sax(R"({"weight_map": {"a": 3}} x)").rule,
            FormatError::kIndexBadJson);
  EXPECT_EQ(Sax(R"({"weight_map": {"a": 3, "a": "s"}})").rule,
            FormatError::kDuplicateKey);
  EXPECT_EQ(Sax(R"({"metadata": 1, "weight_map": {"a": 3}})").rule,
            FormatError::kIndexBadJson);
  EXPECT_EQ(Sax(R"({"weight_map": {"a": "../x"}, "metadata": [])").rule,
            FormatError::kIndexBadJson);
}

}  // namespace
}  // namespace weightlift
