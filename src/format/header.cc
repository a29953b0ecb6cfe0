#include "format/header.h"

#include <algorithm>
#include <string>
#include <utility>

#include "format/json_reader.h"
#include "weightlift/format_error.h"

namespace weightlift::internal {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

Status Corrupt(FormatError rule, std::string_view label, std::string msg) {
  std::string m(label);
  m += ": ";
  m += msg;
  return Status::Corruption(rule, std::move(m));
}

std::string TensorLabel(std::string_view name) {
  std::string s = "tensor '";
  // Names are valid UTF-8 but may hold control bytes; keep messages printable.
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      s += "\\x";
      s += kHex[(c >> 4) & 0xF];
      s += kHex[c & 0xF];
    } else {
      s += c;
    }
  }
  s += "'";
  return s;
}

// A JSON integer >= 0 that fits in 64 bits, or nothing. Floats (1.0, 1e3,
// 2^64 which nlohmann turns into a float), strings and booleans fail.
bool AsU64(const Json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {  // nlohmann: signed means negative, or -0
    const int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

Status ParseMetadata(const Json& v, std::string_view label,
                     std::map<std::string, std::string>* out) {
  if (!v.is_object()) {
    return Corrupt(
        FormatError::kBadMetadata, label,
        "__metadata__ must be an object of strings, got " + JsonPreview(v));
  }
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return Corrupt(FormatError::kBadMetadata, label,
                     "__metadata__ value of \"" + key +
                         "\" must be a string, got " + JsonPreview(value));
    }
    out->emplace(key, value.get<std::string>());
  }
  return Status::OK();
}

Status ParseEntry(const std::string& name, const Json& v,
                  std::string_view label, ParsedTensor* t) {
  const std::string who = TensorLabel(name);
  if (name.empty()) {
    return Corrupt(FormatError::kEmptyName, label,
                   "a tensor has an empty name");
  }
  if (!v.is_object()) {
    return Corrupt(FormatError::kEntryNotObject, label,
                   who + ": entry must be an object, got " + JsonPreview(v));
  }
  for (const auto& [key, unused] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Corrupt(FormatError::kUnknownField, label,
                     who + ": unknown field \"" + key +
                         "\" (allowed: dtype, shape, data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) {
      return Corrupt(FormatError::kMissingField, label,
                     who + ": missing field \"" + field + "\"");
    }
  }
  t->name = name;

  const Json& dtype = v["dtype"];
  std::optional<DType> parsed;
  if (dtype.is_string()) parsed = ParseDType(dtype.get<std::string>());
  if (!parsed) {
    return Corrupt(FormatError::kBadDtype, label,
                   who + ": unknown dtype " + JsonPreview(dtype));
  }
  t->dtype = *parsed;

  const Json& shape = v["shape"];
  if (!shape.is_array()) {
    return Corrupt(FormatError::kBadShape, label,
                   who + ": shape must be an array, got " + JsonPreview(shape));
  }
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return Corrupt(FormatError::kRankTooLarge, label,
                   who + ": shape has " + std::to_string(shape.size()) +
                       " dimensions, more than the limit of " +
                       std::to_string(kMaxRank));
  }
  t->shape.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t d;
    if (!AsU64(shape[i], &d)) {
      return Corrupt(FormatError::kBadShape, label,
                     who + ": shape[" + std::to_string(i) +
                         "] must be a non-negative integer, got " +
                         JsonPreview(shape[i]));
    }
    t->shape.push_back(d);
  }

  const Json& offs = v["data_offsets"];
  if (!offs.is_array() || offs.size() != 2 || !AsU64(offs[0], &t->begin) ||
      !AsU64(offs[1], &t->end)) {
    return Corrupt(FormatError::kBadOffsets, label,
                   who +
                       ": data_offsets must be [begin, end] of two "
                       "non-negative integers, got " +
                       JsonPreview(offs));
  }
  if (t->begin > t->end) {
    return Corrupt(FormatError::kBadOffsets, label,
                   who + ": data_offsets [" + std::to_string(t->begin) + ", " +
                       std::to_string(t->end) + "] end before begin");
  }

  WL_ASSIGN_OR_RETURN(uint64_t bytes, TensorBytes(t->shape, t->dtype, who));
  if (t->end - t->begin != bytes) {
    return Corrupt(FormatError::kSizeMismatch, label,
                   who + ": data_offsets [" + std::to_string(t->begin) + ", " +
                       std::to_string(t->end) + "] hold " +
                       std::to_string(t->end - t->begin) + " bytes but " +
                       std::string(DTypeName(t->dtype)) + " shape needs " +
                       std::to_string(bytes));
  }
  return Status::OK();
}

// Sorted by offset, ranges must tile [0, last end) exactly.
Status CheckRanges(const std::vector<ParsedTensor>& ts,
                   std::string_view label) {
  uint64_t expected = 0;
  const ParsedTensor* prev = nullptr;
  for (const ParsedTensor& t : ts) {
    if (t.begin != expected) {
      const bool gap = t.begin > expected;
      std::string m = TensorLabel(t.name) + ": data_offsets [" +
                      std::to_string(t.begin) + ", " + std::to_string(t.end) +
                      "] ";
      if (prev == nullptr) {
        m += "but the first tensor must begin at 0 (gap of " +
             std::to_string(t.begin) + " bytes)";
      } else {
        m += (gap ? "leave a gap after " : "overlap ") +
             TensorLabel(prev->name) + " [" + std::to_string(prev->begin) +
             ", " + std::to_string(prev->end) + "]";
      }
      return Corrupt(gap ? FormatError::kRangeGap : FormatError::kRangeOverlap,
                     label, std::move(m));
    }
    expected = t.end;
    prev = &t;
  }
  return Status::OK();
}

}  // namespace

Status ParseEntriesStrict(std::string_view text, std::string_view label,
                          const ParseLimits& limits, ParsedHeader* h) {
  JsonError jerr;
  Json root = ParseStrictJson(text, kMaxJsonDepth, &jerr);
  if (jerr.rule != FormatError::kNone) {
    return Corrupt(jerr.rule, label, "header: " + jerr.message);
  }
  if (!root.is_object()) {
    return Corrupt(FormatError::kHeaderNotObject, label,
                   "header must be a JSON object, got " + JsonPreview(root));
  }
  const size_t count = root.size() - (root.contains(kMetadataKey) ? 1 : 0);
  if (count > limits.max_tensors) {
    return Corrupt(FormatError::kTooManyTensors, label,
                   std::to_string(count) + " tensors, more than the limit of " +
                       std::to_string(limits.max_tensors));
  }
  h->tensors.reserve(count);
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      WL_RETURN_IF_ERROR(ParseMetadata(value, label, &h->metadata));
      h->has_metadata = true;
      continue;
    }
    ParsedTensor t;
    Status s = ParseEntry(key, value, label, &t);
    if (!s.ok()) {
      // TensorBytes messages lack the file label; add it once here.
      if (s.rule() == FormatError::kSizeOverflow ||
          s.rule() == FormatError::kSubByteMisaligned) {
        return s.WithContext(std::string(label));
      }
      return s;
    }
    h->tensors.push_back(std::move(t));
  }
  return Status::OK();
}

Status CheckFraming(uint64_t n, uint64_t file_size, std::string_view label) {
  if (file_size < 8) {
    return Corrupt(FormatError::kFileTooSmall, label,
                   "file is " + std::to_string(file_size) +
                       " bytes, smaller than the 8-byte header length");
  }
  if (n > kMaxHeaderBytes) {
    return Corrupt(FormatError::kHeaderTooLarge, label,
                   "header length " + std::to_string(n) +
                       " exceeds the limit of " +
                       std::to_string(kMaxHeaderBytes) + " bytes");
  }
  // n <= 1e8 here, so 8 + n cannot overflow.
  if (8 + n > file_size) {
    return Corrupt(FormatError::kHeaderPastEof, label,
                   "header [8, " + std::to_string(8 + n) +
                       ") runs past the end of the file (" +
                       std::to_string(file_size) + " bytes)");
  }
  return Status::OK();
}

StatusOr<uint64_t> TensorBytes(std::span<const uint64_t> shape, DType dtype,
                               std::string_view what) {
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return Status::Corruption(
          FormatError::kSizeOverflow,
          std::string(what) + ": element count of the shape overflows 64 bits");
    }
  }
  uint64_t bits;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DTypeBits(dtype)),
                             &bits)) {
    return Status::Corruption(
        FormatError::kSizeOverflow,
        std::string(what) + ": " + std::to_string(elements) + " elements of " +
            std::string(DTypeName(dtype)) + " overflow 64 bits");
  }
  if (bits % 8 != 0) {
    return Status::Corruption(
        FormatError::kSubByteMisaligned,
        std::string(what) + ": " + std::to_string(elements) + " elements of " +
            std::string(DTypeName(dtype)) + " are " + std::to_string(bits) +
            " bits, not a whole number of bytes");
  }
  return bits / 8;
}

StatusOr<ParsedHeader> ParseHeader(std::span<const std::byte> json, uint64_t n,
                                   uint64_t file_size, std::string_view label,
                                   const ParseLimits& limits) {
  WL_RETURN_IF_ERROR(CheckFraming(n, file_size, label));
  if (json.size() != n) {
    return Status::InvalidArgument(std::string(label) + ": ParseHeader given " +
                                   std::to_string(json.size()) +
                                   " header bytes, length field says " +
                                   std::to_string(n));
  }
  size_t bad = 0;
  if (!IsValidUtf8(json, &bad)) {
    return Corrupt(FormatError::kHeaderNotUtf8, label,
                   "header is not valid UTF-8 at header byte " +
                       std::to_string(bad) + " (file offset " +
                       std::to_string(8 + bad) + ")");
  }
  const std::string_view text(reinterpret_cast<const char*>(json.data()),
                              json.size());
  ParsedHeader h;
  h.header_size = n;
  h.data_offset = 8 + n;
  h.file_size = file_size;
  // The plain header in one pass; anything else (and every error) through
  // the strict reader (see header_fast.cc).
  if (!ParseEntriesFast(text, limits, &h)) {
    h.tensors.clear();
    h.metadata.clear();
    h.has_metadata = false;
    WL_RETURN_IF_ERROR(ParseEntriesStrict(text, label, limits, &h));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const ParsedTensor& a, const ParsedTensor& b) {
              if (a.begin != b.begin) return a.begin < b.begin;
              if (a.end != b.end) return a.end < b.end;
              return a.name < b.name;
            });
  WL_RETURN_IF_ERROR(CheckRanges(h.tensors, label));

  const uint64_t last_end = h.tensors.empty() ? 0 : h.tensors.back().end;
  uint64_t data_end;
  if (__builtin_add_overflow(h.data_offset, last_end, &data_end) ||
      data_end > file_size) {
    return Corrupt(
        FormatError::kDataPastEof, label,
        "tensor data ends at file offset " + std::to_string(h.data_offset) +
            " + " + std::to_string(last_end) + ", past the end of the file (" +
            std::to_string(file_size) + " bytes)");
  }
  if (data_end < file_size) {
    return Corrupt(FormatError::kTrailingBytes, label,
                   std::to_string(file_size - data_end) +
                       " trailing bytes after the last tensor (data ends at " +
                       std::to_string(data_end) + ", file is " +
                       std::to_string(file_size) + " bytes)");
  }
  return h;
}

StatusOr<ParsedHeader> ParseFileImage(std::span<const std::byte> file,
                                      std::string_view label,
                                      const ParseLimits& limits) {
  if (file.size() < 8) {
    WL_RETURN_IF_ERROR(CheckFraming(0, file.size(), label));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  WL_RETURN_IF_ERROR(CheckFraming(n, file.size(), label));
  return ParseHeader(file.subspan(8, n), n, file.size(), label, limits);
}

}  // namespace weightlift::internal
