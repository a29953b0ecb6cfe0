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

// What ParseStrictJson checks before parsing: no UTF-8 byte-order mark and
// no NUL byte. False with ERROR set (kHeaderBadJson) otherwise.
bool CheckStrictJsonText(std::string_view text, JsonError* error);

// Records nlohmann's syntax error at POSITION in ERROR (kHeaderBadJson),
// unless an error is recorded already: the SAX handlers' parse_error.
void RecordParseError(std::size_t position,
                      const nlohmann::detail::exception& ex, JsonError* error);

// The errors a strict SAX handler records itself, in one wording for every
// reader (the DOM builder, the index); each returns false, for the handler
// to return. KEY repeated in the object that is the value of CONTAINER (null:
// the top-level object); anything else that is not JSON the strict reader
// takes (kHeaderBadJson); containers nested deeper than MAX_DEPTH.
bool RecordDuplicateKey(const std::string& key, const std::string* container,
                        JsonError* error);
bool RecordBadJson(std::string message, JsonError* error);
bool RecordTooDeep(int max_depth, JsonError* error);

// Runs nlohmann's iterative SAX parser over TEXT with HANDLER, after
// CheckStrictJsonText, in strict mode (one value, then only whitespace). For
// readers that build their own result instead of a DOM (the index). The
// handler records its own errors in ERROR (its parse_error should call
// RecordParseError). True when the parse succeeded and ERROR is empty.
template <class Handler>
bool SaxParseStrict(std::string_view text, Handler* handler, JsonError* error) {
  *error = JsonError{};
  if (!CheckStrictJsonText(text, error)) return false;
  const bool ok = nlohmann::json::sax_parse(
      text.begin(), text.end(), handler, nlohmann::json::input_format_t::json,
      /*strict=*/true, /*ignore_comments=*/false);
  if (!ok && error->rule == FormatError::kNone) {
    error->rule = FormatError::kHeaderBadJson;
    error->message = "invalid JSON";
  }
  return ok && error->rule == FormatError::kNone;
}

// A short, printable rendering of a JSON value for error messages.
std::string JsonPreview(const nlohmann::json& value);

}  // namespace weightlift::internal
