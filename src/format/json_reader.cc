#include "format/json_reader.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace weightlift::internal {
namespace {

using Json = nlohmann::json;

// Builds a DOM like nlohmann's json_sax_dom_parser, but refuses duplicate
// keys and deep nesting. nlohmann's SAX driver keeps its own state on the
// heap, so 200,000 nested '[' cost no stack; this handler stops at the first
// container past the limit.
class StrictDomBuilder {
 public:
  StrictDomBuilder(Json* root, int max_depth, JsonError* error)
      : root_(root), max_depth_(max_depth), error_(error) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) {
    return Put(Json(v));
  }
  bool string(Json::string_t& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) { return Open(Json::object()); }
  bool key(Json::string_t& k) {
    Json* obj = stack_.back();
    if (obj->contains(k)) {
      return RecordDuplicateKey(
          k, names_.size() <= 1 ? nullptr : &names_.back(), error_);
    }
    pending_key_ = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() { return Close(); }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) {
    RecordParseError(position, ex, error_);
    return false;
  }

 private:
  bool Fail(std::string m) { return RecordBadJson(std::move(m), error_); }

  // Stores V in the innermost container (or as the root); returns where.
  Json* Insert(Json v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    Json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    Json& slot = (*top)[pending_key_];
    slot = std::move(v);
    return &slot;
  }

  bool Put(Json v) {
    Insert(std::move(v));
    return true;
  }

  bool Open(Json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      return RecordTooDeep(max_depth_, error_);
    }
    std::string name = !stack_.empty() && stack_.back()->is_object()
                           ? pending_key_
                       : names_.empty() ? std::string()
                                        : names_.back();
    Json* slot = Insert(std::move(container));
    stack_.push_back(slot);
    names_.push_back(std::move(name));
    return true;
  }

  bool Close() {
    stack_.pop_back();
    names_.pop_back();
    return true;
  }

  Json* root_;
  int max_depth_;
  JsonError* error_;
  std::vector<Json*> stack_;
  std::vector<std::string> names_;  // key of each open container
  std::string pending_key_;
};

}  // namespace

bool IsValidUtf8(std::span<const std::byte> bytes, size_t* bad_offset) {
  const size_t n = bytes.size();
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  while (i < n) {
    const uint8_t c = at(i);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {  // continuation byte, overlong lead (C0, C1) or F5..FF
      *bad_offset = i;
      return false;
    }
    if (n - i < len) {
      *bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      const uint8_t cc = at(i + k);
      if ((cc & 0xC0) != 0x80) {
        *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong =
        (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    if (overlong || surrogate || cp > 0x10FFFF) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

bool CheckStrictJsonText(std::string_view text, JsonError* error) {
  if (text.size() >= 3 && static_cast<uint8_t>(text[0]) == 0xEF &&
      static_cast<uint8_t>(text[1]) == 0xBB &&
      static_cast<uint8_t>(text[2]) == 0xBF) {
    error->rule = FormatError::kHeaderBadJson;
    error->message = "JSON starts with a UTF-8 byte-order mark";
    return false;
  }
  // nlohmann's lexer takes a NUL byte for the end of input and would ignore
  // whatever follows it; a raw NUL is never valid JSON anyway.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    error->rule = FormatError::kHeaderBadJson;
    error->message = "NUL byte at byte " + std::to_string(nul) +
                     " (raw NUL is not valid JSON)";
    return false;
  }
  return true;
}

void RecordParseError(std::size_t position,
                      const nlohmann::detail::exception& ex, JsonError* error) {
  if (error->rule != FormatError::kNone) return;
  error->rule = FormatError::kHeaderBadJson;
  // ex.what() already carries nlohmann's position and reason.
  error->message =
      "invalid JSON near byte " + std::to_string(position) + ": " + ex.what();
}

bool RecordDuplicateKey(const std::string& key, const std::string* container,
                        JsonError* error) {
  error->rule = FormatError::kDuplicateKey;
  error->message =
      "duplicate key \"" + key + "\" in " +
      (container == nullptr ? std::string("the top-level object")
                            : "the value of \"" + *container + "\"") +
      " (a strict reader rejects what the reference would "
      "silently overwrite)";
  return false;
}

bool RecordBadJson(std::string message, JsonError* error) {
  error->rule = FormatError::kHeaderBadJson;
  error->message = std::move(message);
  return false;
}

bool RecordTooDeep(int max_depth, JsonError* error) {
  return RecordBadJson(
      "JSON nested deeper than " + std::to_string(max_depth) + " levels",
      error);
}

nlohmann::json ParseStrictJson(std::string_view text, int max_depth,
                               JsonError* error) {
  Json root;
  StrictDomBuilder builder(&root, max_depth, error);
  if (!SaxParseStrict(text, &builder, error)) return Json();
  return root;
}

std::string JsonPreview(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', /*ensure_ascii=*/true,
                             Json::error_handler_t::replace);
  constexpr size_t kMax = 60;
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

}  // namespace weightlift::internal
