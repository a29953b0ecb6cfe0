// Glob patterns with the meaning of Python's fnmatch.fnmatchcase, which is
// what a tp_plan's patterns mean to the transformers users who write them.
//
// Why not glibc's fnmatch(3): its answer depends on the process's locale
// (in a UTF-8 locale '?' is one character, in "C" one byte, so the CLI and
// the Python module could disagree on a non-ASCII name), it treats "[^...]"
// as a negation where Python reads a literal '^', and in a UTF-8 locale it
// converts both strings to wide characters on every call: 63% of a shard
// rule's time over a Llama checkpoint's 291 names and 8 patterns (perf,
// development VM).
//
// The rules (Python 3's fnmatch.translate):
//   *        any run of characters, empty included ('.' and '/' too);
//   ?        one character (a UTF-8 code point; a byte that is not valid
//            UTF-8 counts as one character);
//   [set]    one character in SET: single characters and ranges "a-z"
//            (a range whose start is above its end matches nothing); '!'
//            first negates; ']' first, or right after that '!', is a
//            member; a '-' first, last, or right after a range is a member;
//            a negated set whose ranges all dropped out ("[!b-a]") matches
//            any one character ("[!]" itself has no closing ']': its ']'
//            is a member);
//   [        with no closing ']' is a literal '[';
//   anything else, '\' included, matches itself.
// The whole name must match.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace weightlift::internal {

class GlobPattern {
 public:
  explicit GlobPattern(std::string_view pattern);

  bool Matches(std::string_view name) const;
  // NAME already decoded (DecodeChars): for one name tried against many
  // patterns.
  bool MatchesChars(std::span<const char32_t> name) const;

 private:
  enum class Kind : uint8_t { kLiteral, kAny, kStar, kSet, kNever };
  struct Token {
    Kind kind = Kind::kLiteral;
    char32_t ch = 0;      // kLiteral
    bool negate = false;  // kSet
    uint32_t first = 0;   // kSet: ranges_[first, first + count)
    uint32_t count = 0;
  };
  struct Range {
    char32_t lo, hi;  // inclusive
  };

  bool InSet(const Token& t, char32_t c) const;
  bool TokenMatches(const Token& t, char32_t c) const;

  std::vector<Token> tokens_;
  std::vector<Range> ranges_;
  // Tokens before the first '*' and after the last (all of them, and no
  // tail, without a '*'): each takes one character, so a name is checked at
  // both ends before any backtracking, which rejects most names at once.
  size_t head_ = 0;
  size_t tail_ = 0;
  bool has_star_ = false;
};

// The next character of S at *AT (a UTF-8 code point, or one byte where S
// is not valid UTF-8 there); advances *AT past it. REQUIRES *AT < S.size().
char32_t NextChar(std::string_view s, size_t* at);

// S as characters (NextChar's).
std::vector<char32_t> DecodeChars(std::string_view s);

}  // namespace weightlift::internal
