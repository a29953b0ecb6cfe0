// ParseByteSize and FormatByteSize: see include/weightlift/byte_size.h.
#include "weightlift/byte_size.h"

#include <cstdio>
#include <limits>
#include <numeric>

namespace weightlift {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

char Upper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// The multiplier UNIT names (already upper case, no surrounding spaces), or
// 0 for no unit this parser knows.
uint64_t Multiplier(const std::string& unit) {
  if (unit.empty() || unit == "B") return 1;
  int power = 0;
  switch (unit[0]) {
    case 'K':
      power = 1;
      break;
    case 'M':
      power = 2;
      break;
    case 'G':
      power = 3;
      break;
    case 'T':
      power = 4;
      break;
    default:
      return 0;
  }
  const std::string rest = unit.substr(1);
  uint64_t base;
  if (rest.empty() || rest == "I" || rest == "IB") {
    base = 1024;
  } else if (rest == "B") {
    base = 1000;
  } else {
    return 0;
  }
  uint64_t m = 1;
  for (int p = 0; p < power; ++p) m *= base;  // at most 1024^4: no overflow
  return m;
}

}  // namespace

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument(
        "invalid size '" + std::string(text) + "': " + why +
        " (bytes, or a number with a unit: 8M = 8MiB = 8 * 1024^2, "
        "8MB = 8 * 1000^2)");
  };
  const std::string_view s = Trim(text);
  size_t i = 0;
  uint64_t whole = 0;
  while (i < s.size() && IsDigit(s[i])) {
    const uint64_t digit = static_cast<uint64_t>(s[i] - '0');
    if (whole > (kMax - digit) / 10) return bad("too large");
    whole = whole * 10 + digit;
    ++i;
  }
  const size_t whole_digits = i;
  // Fraction digits as FRAC / 10^FRAC_DIGITS; 18 digits keep 10^n in range.
  uint64_t frac = 0, frac_scale = 1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < s.size() && IsDigit(s[i])) {
      if (i - start >= 18) return bad("too many fraction digits");
      frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
      frac_scale *= 10;
      ++i;
    }
    if (i == start) return bad("no digits after the decimal point");
  }
  if (whole_digits == 0) return bad("no number");
  std::string unit;
  for (char c : Trim(s.substr(i))) unit.push_back(Upper(c));
  const uint64_t m = Multiplier(unit);
  if (m == 0) return bad("unknown unit");
  if (whole != 0 && m > kMax / whole) return bad("too large");
  uint64_t value = whole * m;
  if (frac != 0) {
    // FRAC / FRAC_SCALE of the unit must be whole bytes: in lowest terms
    // F / D, D has to divide the multiplier.
    const uint64_t g = std::gcd(frac, frac_scale);
    const uint64_t f = frac / g, d = frac_scale / g;
    if (m % d != 0) return bad("not a whole number of bytes");
    const uint64_t per = m / d;
    if (f > kMax / per || f * per > kMax - value) return bad("too large");
    value += f * per;
  }
  return value;
}

std::string FormatByteSize(uint64_t bytes) {
  static const char* const kUnits[] = {"B",   "KiB", "MiB", "GiB",
                                       "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

}  // namespace weightlift
