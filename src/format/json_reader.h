// Strict JSON reading for untrusted headers and indexes.
//
// nlohmann's default parser silently keeps the last of duplicate keys, skips
// a UTF-8 byte-order mark and recurses without bound when building a DOM. The
// reader here drives nlohmann's (iterative) SAX parser with its own handler
// so that duplicate keys at any level and nesting deeper than kMaxJsonDepth
// fail cleanly, and rejects the BOM. Internal to src/format.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "weightlift/format_error.h"

namespace weightlift::internal {

struct JsonError {
  FormatError rule = FormatError::kNone;  // kHeaderBadJson or kDuplicateKey
  std::string message;  // position and reason, without the file name
};

// True when BYTES are well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF). On failure *BAD_OFFSET is the first bad byte.
bool IsValidUtf8(std::span<const std::byte> bytes, size_t* bad_offset);

// Parses TEXT as one JSON value followed only by JSON whitespace (space, tab,
// CR, LF). Fails with kDuplicateKey for a repeated key in any object, and with
// kHeaderBadJson for anything else: syntax, a BOM, NUL bytes, trailing bytes,
// nesting deeper than MAX_DEPTH, numbers out of range (1e400). Does not check
// UTF-8 first; callers do (IsValidUtf8) to report kHeaderNotUtf8 precisely.
// Returns kNone in ERROR->rule on success.
nlohmann::json ParseStrictJson(std::string_view text, int max_depth,
                               JsonError* error);

// A short, printable rendering of a JSON value for error messages.
std::string JsonPreview(const nlohmann::json& value);

}  // namespace weightlift::internal
