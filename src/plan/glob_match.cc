#include "plan/glob_match.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weightlift::internal {

char32_t NextChar(std::string_view s, size_t* at) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const size_t i = *at;
  const unsigned char c = b(i);
  int len = 0;
  char32_t cp = 0;
  if (c < 0x80) {
    *at = i + 1;
    return c;
  } else if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  }
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
    *at = i + 1;  // not UTF-8 here: the byte is one character
    return c;
  }
  for (int k = 1; k < len; ++k) {
    const unsigned char cc = b(i + static_cast<size_t>(k));
    if ((cc & 0xC0) != 0x80) {
      *at = i + 1;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms and surrogates are not UTF-8 either.
  const char32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *at = i + 1;
    return c;
  }
  *at = i + static_cast<size_t>(len);
  return cp;
}

std::vector<char32_t> DecodeChars(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t at = 0; at < s.size();) out.push_back(NextChar(s, &at));
  return out;
}

GlobPattern::GlobPattern(std::string_view pattern) {
  const std::vector<char32_t> p = DecodeChars(pattern);
  const size_t n = p.size();
  size_t i = 0;
  while (i < n) {
    const char32_t c = p[i++];
    if (c == U'*') {
      if (tokens_.empty() || tokens_.back().kind != Kind::kStar) {
        tokens_.push_back({Kind::kStar});
      }
      continue;
    }
    if (c == U'?') {
      tokens_.push_back({Kind::kAny});
      continue;
    }
    if (c != U'[') {
      tokens_.push_back({Kind::kLiteral, c});
      continue;
    }
    // A set: find its closing ']' as fnmatch.translate does.
    size_t j = i;
    if (j < n && p[j] == U'!') ++j;
    if (j < n && p[j] == U']') ++j;
    while (j < n && p[j] != U']') ++j;
    if (j >= n) {
      tokens_.push_back({Kind::kLiteral, U'['});  // no ']': a literal '['
      continue;
    }
    // Split the contents at the hyphens that make ranges: chunks of
    // members, a range between the last of one chunk and the first of the
    // next. The first member (after a '!') cannot start a range's hyphen,
    // and the character after a range's end is never one either.
    std::vector<std::u32string> chunks;
    const std::u32string stuff(p.begin() + static_cast<ptrdiff_t>(i),
                               p.begin() + static_cast<ptrdiff_t>(j));
    if (stuff.find(U'-') == std::u32string::npos) {
      chunks.push_back(stuff);
    } else {
      size_t start = 0;
      size_t k = stuff[0] == U'!' ? 2 : 1;
      while (k < stuff.size()) {
        const size_t h = stuff.find(U'-', k);
        if (h == std::u32string::npos) break;
        chunks.push_back(stuff.substr(start, h - start));
        start = h + 1;
        k = h + 3;
      }
      if (start < stuff.size()) {
        chunks.push_back(stuff.substr(start));
      } else {
        chunks.back() += U'-';  // a trailing hyphen is a member
      }
      // A range whose start is above its end matches nothing: drop it.
      for (size_t m = chunks.size() - 1; m > 0; --m) {
        if (!chunks[m - 1].empty() && !chunks[m].empty() &&
            chunks[m - 1].back() > chunks[m].front()) {
          chunks[m - 1].pop_back();
          chunks[m - 1] += chunks[m].substr(1);
          chunks.erase(chunks.begin() + static_cast<ptrdiff_t>(m));
        }
      }
    }
    i = j + 1;
    const bool empty = chunks.size() == 1 && chunks[0].empty();
    if (empty) {
      tokens_.push_back({Kind::kNever});
      continue;
    }
    if (chunks.size() == 1 && chunks[0] == U"!") {
      tokens_.push_back({Kind::kAny});  // "[!b-a]": any one character
      continue;
    }
    Token t{Kind::kSet};
    if (!chunks[0].empty() && chunks[0][0] == U'!') {
      t.negate = true;
      chunks[0].erase(0, 1);
    }
    t.first = static_cast<uint32_t>(ranges_.size());
    for (size_t m = 0; m < chunks.size(); ++m) {
      for (char32_t member : chunks[m]) ranges_.push_back({member, member});
      if (m + 1 < chunks.size() && !chunks[m].empty()) {
        ranges_.push_back({chunks[m].back(), chunks[m + 1].front()});
      }
    }
    t.count = static_cast<uint32_t>(ranges_.size()) - t.first;
    tokens_.push_back(t);
  }
  const auto is_star = [](const Token& t) { return t.kind == Kind::kStar; };
  const auto first = std::find_if(tokens_.begin(), tokens_.end(), is_star);
  has_star_ = first != tokens_.end();
  head_ = static_cast<size_t>(first - tokens_.begin());
  if (has_star_) {
    const auto last = std::find_if(tokens_.rbegin(), tokens_.rend(), is_star);
    tail_ = static_cast<size_t>(last - tokens_.rbegin());
  }
}

bool GlobPattern::InSet(const Token& t, char32_t c) const {
  bool in = false;
  for (uint32_t k = t.first; k < t.first + t.count && !in; ++k) {
    in = ranges_[k].lo <= c && c <= ranges_[k].hi;
  }
  return in != t.negate;
}

bool GlobPattern::TokenMatches(const Token& t, char32_t c) const {
  switch (t.kind) {
    case Kind::kAny:
      return true;
    case Kind::kLiteral:
      return t.ch == c;
    case Kind::kSet:
      return InSet(t, c);
    default:
      return false;  // kNever; kStar is never asked
  }
}

bool GlobPattern::Matches(std::string_view name) const {
  const std::vector<char32_t> chars = DecodeChars(name);
  return MatchesChars(chars);
}

bool GlobPattern::MatchesChars(std::span<const char32_t> name) const {
  const size_t n = name.size();
  // Both ends first: without a '*' the whole name, with one the characters
  // before the first and after the last take one token each.
  if (!has_star_ ? n != head_ : n < head_ + tail_) return false;
  for (size_t k = 0; k < head_; ++k) {
    if (!TokenMatches(tokens_[k], name[k])) return false;
  }
  if (!has_star_) return true;
  for (size_t k = 0; k < tail_; ++k) {
    if (!TokenMatches(tokens_[tokens_.size() - tail_ + k],
                      name[n - tail_ + k])) {
      return false;
    }
  }
  // The middle, from the first '*' to the last, against what the ends left.
  // Each token but '*' takes exactly one character, so one backtracking
  // point (the last '*' seen) is enough: on a mismatch that '*' takes one
  // more character and matching resumes after it.
  const size_t t_end = tokens_.size() - tail_;
  const size_t c_end = n - tail_;
  size_t ti = head_, at = head_;
  size_t star_ti = SIZE_MAX, star_at = 0;
  while (at < c_end || ti < t_end) {
    if (ti < t_end) {
      const Token& t = tokens_[ti];
      if (t.kind == Kind::kStar) {
        star_ti = ti++;
        star_at = at;
        continue;
      }
      if (at < c_end && TokenMatches(t, name[at])) {
        ++ti;
        ++at;
        continue;
      }
    }
    if (star_ti == SIZE_MAX || star_at >= c_end) return false;
    ti = star_ti + 1;
    at = ++star_at;  // the '*' takes one more character
  }
  return true;
}

}  // namespace weightlift::internal
