// ParseEntriesFast: the header as writers write it, read in one pass.
//
// Opening a checkpoint is mostly reading its headers, and the strict reader
// (ParseEntriesStrict: nlohmann's SAX parser building a DOM of std::maps,
// then a walk over it) costs tens of microseconds for a few dozen tensors,
// more than safetensors' whole open. Nearly every header is plain: an
// object of tensor entries {"dtype": "...", "shape": [...],
// "data_offsets": [b, e]} and maybe "__metadata__" (an object of strings),
// with no escapes in any string and integers written as digits. This reader
// takes exactly that and nothing else: at the first thing outside it
// (an escape, a float, a repeated or unknown key, a bad value, a limit
// reached) it declines and ParseHeader runs the strict reader, which then
// decides and names the error. What it accepts, the strict reader accepts
// with the same result (header_test.cc holds the two to that on random and
// mutated headers).
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/header.h"
#include "format/plain_json.h"
#include "weightlift/format_error.h"

namespace weightlift::internal {
namespace {

// {"k": "v", ...} with distinct keys.
bool Metadata(PlainJson& in, std::map<std::string, std::string>* out) {
  if (!in.Take('{')) return false;
  if (in.Take('}')) return true;
  do {
    std::string_view key, value;
    if (!in.String(&key) || !in.Take(':') || !in.String(&value)) return false;
    if (!out->emplace(std::string(key), std::string(value)).second) {
      return false;  // a repeated key: the strict reader names it
    }
  } while (in.Take(','));
  return in.Take('}');
}

// {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each once, in any
// order, all valid and consistent (the checks of ParseEntry).
bool Entry(PlainJson& in, std::string_view name, ParsedTensor* t) {
  if (name.empty() || !in.Take('{')) return false;
  bool dtype = false, shape = false, offsets = false;
  std::vector<uint64_t> offs;
  do {
    std::string_view key;
    if (!in.String(&key) || !in.Take(':')) return false;
    if (key == "dtype" && !dtype) {
      std::string_view text;
      if (!in.String(&text)) return false;
      std::optional<DType> d = ParseDType(text);
      if (!d) return false;
      t->dtype = *d;
      dtype = true;
    } else if (key == "shape" && !shape) {
      if (!in.UnsignedArray(&t->shape, static_cast<size_t>(kMaxRank))) {
        return false;
      }
      shape = true;
    } else if (key == "data_offsets" && !offsets) {
      if (!in.UnsignedArray(&offs, 2) || offs.size() != 2) return false;
      offsets = true;
    } else {
      return false;  // unknown or repeated
    }
  } while (in.Take(','));
  if (!in.Take('}') || !dtype || !shape || !offsets) return false;
  t->name = std::string(name);
  t->begin = offs[0];
  t->end = offs[1];
  if (t->begin > t->end) return false;
  uint64_t elements = 1;
  for (uint64_t d : t->shape) {
    if (__builtin_mul_overflow(elements, d, &elements)) return false;
  }
  uint64_t bits;
  if (__builtin_mul_overflow(
          elements, static_cast<uint64_t>(DTypeBits(t->dtype)), &bits) ||
      bits % 8 != 0) {
    return false;
  }
  return t->end - t->begin == bits / 8;
}

}  // namespace

bool ParseEntriesFast(std::string_view text, const ParseLimits& limits,
                      ParsedHeader* h) {
  PlainJson in(text);
  if (!in.Take('{')) return false;
  if (!in.Take('}')) {
    do {
      std::string_view key;
      if (!in.String(&key) || !in.Take(':')) return false;
      if (key == "__metadata__") {
        if (h->has_metadata || !Metadata(in, &h->metadata)) return false;
        h->has_metadata = true;
        continue;
      }
      if (h->tensors.size() >= limits.max_tensors) return false;
      ParsedTensor& t = h->tensors.emplace_back();
      if (!Entry(in, key, &t)) return false;
    } while (in.Take(','));
    if (!in.Take('}')) return false;
  }
  if (!in.AtEnd()) return false;
  // A name given twice: the strict reader's duplicate key.
  std::vector<std::string_view> names;
  names.reserve(h->tensors.size());
  for (const ParsedTensor& t : h->tensors) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  return std::adjacent_find(names.begin(), names.end()) == names.end();
}

}  // namespace weightlift::internal
