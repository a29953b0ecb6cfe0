// PlainJson: a reader of the plain JSON that checkpoint writers emit, for
// the fast paths of the header (header_fast.cc) and the index (index.cc).
// It takes strings without escapes or control bytes, integers written as
// plain digits, and whitespace; at anything else a caller declines and the
// strict reader (json_reader.h) decides and names the error. The text must
// be valid UTF-8 (checked before). Internal to src/format.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace weightlift::internal {

class PlainJson {
 public:
  explicit PlainJson(std::string_view text)
      : p_(text.data()), end_(text.data() + text.size()) {}

  // JSON whitespace, then C; false (nothing consumed but whitespace)
  // otherwise.
  bool Take(char c) {
    SkipSpace();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  // A string without escapes or control bytes (the text is valid UTF-8,
  // checked before): its contents.
  bool String(std::string_view* out) {
    if (!Take('"')) return false;
    const char* begin = p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *out = std::string_view(begin, static_cast<size_t>(p_ - begin));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20) return false;
      ++p_;
    }
    return false;
  }

  // An integer >= 0 written as plain digits (no sign, fraction, exponent
  // or leading zero) that fits in 64 bits.
  bool Unsigned(uint64_t* out) {
    SkipSpace();
    if (p_ >= end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && p_ + 1 < end_ && p_[1] >= '0' && p_[1] <= '9') {
      return false;  // a leading zero: not JSON
    }
    uint64_t v = 0;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) ||
          __builtin_add_overflow(v, static_cast<uint64_t>(*p_ - '0'), &v)) {
        return false;
      }
      ++p_;
    }
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    *out = v;
    return true;
  }

  // [n, n, ...] of Unsigned, at most MAX_COUNT of them.
  bool UnsignedArray(std::vector<uint64_t>* out, size_t max_count) {
    if (!Take('[')) return false;
    if (Take(']')) return true;
    do {
      uint64_t v;
      if (out->size() >= max_count || !Unsigned(&v)) return false;
      out->push_back(v);
    } while (Take(','));
    return Take(']');
  }

  // Only whitespace is left.
  bool AtEnd() {
    SkipSpace();
    return p_ == end_;
  }

 private:
  void SkipSpace() {
    while (p_ < end_ &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) {
      ++p_;
    }
  }

  const char* p_;
  const char* end_;
};

}  // namespace weightlift::internal
