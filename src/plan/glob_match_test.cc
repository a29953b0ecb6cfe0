// GlobPattern against Python's fnmatch.fnmatchcase: the table below was
// computed by Python 3.11's fnmatch (42 patterns x 44 names, every pair;
// written by a one-off script; tests/python/test_tp.py runs the same
// comparison live through the shard rule).
#include "plan/glob_match.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string>

namespace weightlift::internal {
namespace {

const char* const kPatterns[] = {
    "*",
    "",
    "a",
    "a*",
    "*b",
    "a*b",
    "a?c",
    "?",
    "??",
    "*.q_proj.weight",
    "model.layers.*.self_attn.[qkv]_proj.weight",
    "lm_hea[dx].weight",
    "x[!a]",
    "x[^a]",
    "x[]a]",
    "x[!]a]",
    "x[!]",
    "x[",
    "x[a",
    "x[a-c]",
    "x[c-a]",
    "x[a-]",
    "x[-a]",
    "x[!-a]",
    "x[a-c-e]",
    "x[a--c]",
    "x[b-a-z]",
    "x[!b-a]",
    "x[\\]",
    "c\\d",
    "x[&&]",
    "x[é-ü]",
    "?é",
    "*é*",
    "é?",
    "x[[]",
    "x[]]",
    "x[]-a]",
    "a**b",
    "*a*a*",
    "[!x]*",
    "[]",
};
const char* const kNames[] = {
    "",
    "a",
    "b",
    "ab",
    "abc",
    "acb",
    "axb",
    "a.b",
    "a/.x/b",
    "xa",
    "xb",
    "x^",
    "x]",
    "x-",
    "x!",
    "xc",
    "xd",
    "xe",
    "xz",
    "x\\",
    "c\\d",
    "cd",
    "x[",
    "x[a",
    "x&",
    "xé",
    "xñ",
    "xÿ",
    "xü",
    "é",
    "aé",
    "éa",
    "ée",
    "x",
    "aaa",
    "aXaYa",
    "model.layers.1.self_attn.q_proj.weight",
    "model.layers.1.self_attn.o_proj.weight",
    "lm_head.weight",
    "lm_heax.weight",
    "[",
    "]",
    "x[]",
    "y",
};
// kPythonFnmatch[p][n]: '1' where fnmatch.fnmatchcase(kNames[n],
// kPatterns[p]) is True.
const char* const kPythonFnmatch[] = {
    "11111111111111111111111111111111111111111111",  // "*"
    "10000000000000000000000000000000000000000000",  // ""
    "01000000000000000000000000000000000000000000",  // "a"
    "01011111100000000000000000000010001100000000",  // "a*"
    "00110111101000000000000000000000000000000000",  // "*b"
    "00010111100000000000000000000000000000000000",  // "a*b"
    "00001000000000000000000000000000000000000000",  // "a?c"
    "01100000000000000000000000000100010000001101",  // "?"
    "00010000011111111111011011111011100000000000",  // "??"
    "00000000000000000000000000000000000010000000",  // "*.q_proj.weight"
    "00000000000000000000000000000000000010000000",  // "model.layers.*.self_attn.[qkv]_proj.weight"
    "00000000000000000000000000000000000000110000",  // "lm_hea[dx].weight"
    "00000000001111111111001011111000000000000000",  // "x[!a]"
    "00000000010100000000000000000000000000000000",  // "x[^a]"
    "00000000010010000000000000000000000000000000",  // "x[]a]"
    "00000000001101111111001011111000000000000000",  // "x[!]a]"
    "00000000000000000000000000000000000000000000",  // "x[!]"
    "00000000000000000000001000000000000000000000",  // "x["
    "00000000000000000000000100000000000000000000",  // "x[a"
    "00000000011000010000000000000000000000000000",  // "x[a-c]"
    "00000000000000000000000000000000000000000000",  // "x[c-a]"
    "00000000010001000000000000000000000000000000",  // "x[a-]"
    "00000000010001000000000000000000000000000000",  // "x[-a]"
    "00000000001110111111001011111000000000000000",  // "x[!-a]"
    "00000000011001010100000000000000000000000000",  // "x[a-c-e]"
    "00000000000000010000000000000000000000000000",  // "x[a--c]"
    "00000000000001000010000000000000000000000000",  // "x[b-a-z]"
    "00000000011111111111001011111000000000000000",  // "x[!b-a]"
    "00000000000000000001000000000000000000000000",  // "x[\\]"
    "00000000000000000000100000000000000000000000",  // "c\\d"
    "00000000000000000000000010000000000000000000",  // "x[&&]"
    "00000000000000000000000001101000000000000000",  // "x[é-ü]"
    "00000000000000000000000001000010000000000000",  // "?é"
    "00000000000000000000000001000111100000000000",  // "*é*"
    "00000000000000000000000000000001100000000000",  // "é?"
    "00000000000000000000001000000000000000000000",  // "x[[]"
    "00000000000010000000000000000000000000000000",  // "x[]]"
    "00000000010110000000000000000000000000000000",  // "x[]-a]"
    "00010111100000000000000000000000000000000000",  // "a**b"
    "00000000000000000000000000000000001111000000",  // "*a*a*"
    "01111111100000000000110000000111101111111101",  // "[!x]*"
    "00000000000000000000000000000000000000000000",  // "[]"
};

TEST(GlobPattern, MatchesLikePythonFnmatchcase) {
  constexpr size_t kP = std::size(kPatterns), kN = std::size(kNames);
  static_assert(std::size(kPythonFnmatch) == kP);
  int checked = 0;
  for (size_t p = 0; p < kP; ++p) {
    ASSERT_EQ(std::string(kPythonFnmatch[p]).size(), kN) << kPatterns[p];
    const GlobPattern glob(kPatterns[p]);
    for (size_t n = 0; n < kN; ++n) {
      EXPECT_EQ(glob.Matches(kNames[n]), kPythonFnmatch[p][n] == '1')
          << "pattern '" << kPatterns[p] << "' name '" << kNames[n] << "'";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1848);
}

TEST(GlobPattern, QuestionMarkIsOneCharacterNotOneByte) {
  // "\xc3\xa9" is e-acute: one character, two bytes.
  EXPECT_TRUE(GlobPattern("x?").Matches("x\xc3\xa9"));
  EXPECT_FALSE(GlobPattern("x??").Matches("x\xc3\xa9"));
  // A byte that is not UTF-8 is one character of its own.
  EXPECT_TRUE(GlobPattern("x?").Matches("x\xff"));
  EXPECT_TRUE(GlobPattern("x??").Matches("x\xc3("));
  EXPECT_FALSE(GlobPattern("x?").Matches("x\xc3("));
  // Overlong and surrogate encodings are bytes, not characters.
  EXPECT_TRUE(GlobPattern("??").Matches("\xc0\xaf"));
  EXPECT_TRUE(GlobPattern("???").Matches("\xed\xa0\x80"));
}

TEST(GlobPattern, NextCharDecodesUtf8) {
  const std::string s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  size_t at = 0;
  EXPECT_EQ(NextChar(s, &at), U'a');
  EXPECT_EQ(NextChar(s, &at), U'\u00e9');
  EXPECT_EQ(NextChar(s, &at), U'\u20ac');
  EXPECT_EQ(NextChar(s, &at), U'\U0001f600');
  EXPECT_EQ(at, s.size());
}

TEST(GlobPattern, LongNamesWithManyStarsStayLinear) {
  // One backtracking point: a pattern of many '*' against a long name that
  // almost matches must not take exponential time.
  const std::string name(20000, 'a');
  EXPECT_FALSE(GlobPattern("*a*a*a*a*a*a*a*a*b").Matches(name));
  EXPECT_TRUE(GlobPattern("*a*a*a*a*a*a*a*a*").Matches(name));
}

}  // namespace
}  // namespace weightlift::internal
