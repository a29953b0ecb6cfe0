#include "format/index.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "format/json_reader.h"
#include "format/plain_json.h"
#include "weightlift/format_error.h"

namespace weightlift::internal {
namespace {

using Json = nlohmann::json;

Status Corrupt(FormatError rule, std::string_view label, std::string msg) {
  return Status::Corruption(rule, std::string(label) + ": " + std::move(msg));
}

// Adds TENSOR to MAP with an empty shard name, in O(1) when keys come
// sorted, as writers emit them: (where, whether it was new).
std::pair<std::map<std::string, std::string>::iterator, bool> AddTensor(
    std::map<std::string, std::string>& map, std::string tensor) {
  const size_t before = map.size();
  auto at = map.empty() || map.rbegin()->first < tensor
                ? map.emplace_hint(map.end(), std::move(tensor), std::string())
                : map.try_emplace(std::move(tensor)).first;
  return {at, map.size() != before};
}

// The index straight from nlohmann's SAX events into ParsedIndex, without a
// DOM: weight_map entries go into the map as they are read (in key order
// they are appended, as writers sort them), so an index of 100,000 entries
// is one pass and one map instead of a DOM, a key set per object and a
// copy. The rules are ParseStrictJson's (duplicate keys anywhere, depth) and
// ParseIndex's; a semantic error is recorded and the parse goes on, so that
// syntax errors and duplicates take precedence as they did with the DOM.
class IndexReader {
 public:
  IndexReader(ParsedIndex* out, JsonError* error) : out_(out), error_(error) {}

  // The first semantic error, by precedence (see ParseIndex).
  enum Problem { kNone, kEntry, kMetadata, kRoot };

  bool null() { return Scalar(Json(nullptr)); }
  bool boolean(bool v) { return Scalar(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Scalar(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Scalar(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) {
    return Scalar(Json(v));
  }
  bool string(Json::string_t& v) {
    if (!stack_.empty() && stack_.back().kind == kMap) {
      const std::string& tensor = entry_->first;
      if (!IsSafeShardName(v)) {
        Note(kEntry, FormatError::kIndexUnsafePath,
             "weight_map[\"" + tensor + "\"] names shard \"" + v +
                 "\": shard names must be relative paths without '..' "
                 "components, control characters, '%', '?', '#' or '\\'");
      }
      entry_->second = std::move(v);
      return true;
    }
    return Scalar(Json(std::move(v)));
  }
  bool binary(Json::binary_t&) {
    return RecordBadJson("binary values are not JSON", error_);
  }

  bool start_object(std::size_t) { return Open(true); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(Json::string_t& k) {
    Frame& top = stack_.back();
    if (top.kind == kMap) {
      if (k.empty()) {
        Note(kEntry, FormatError::kIndexBadEntry,
             "weight_map has an empty tensor name");
      }
      bool added = false;
      std::tie(entry_, added) = AddTensor(out_->weight_map, std::move(k));
      return added || Duplicate(entry_->first);
    }
    if (!top.keys.insert(k).second) return Duplicate(k);
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) {
    RecordParseError(position, ex, error_);
    return false;
  }

  // After a clean parse: the first problem by precedence, as ParseIndex
  // reported them when it checked a DOM (root, metadata, weight_map, its
  // entries).
  Problem problem() const { return problem_; }
  FormatError rule() const { return rule_; }
  const std::string& message() const { return message_; }
  bool saw_map() const { return saw_map_; }

 private:
  enum Kind { kRootObject, kMap, kObject, kArray };
  struct Frame {
    Kind kind;
    std::string name;                      // the key it is the value of
    std::unordered_set<std::string> keys;  // kRootObject and kObject
  };

  // Where a value at the top of the stack sits: the root, a top-level key,
  // a weight_map entry, or anywhere else.
  bool AtRoot() const { return stack_.empty(); }
  bool InRootObject() const {
    return stack_.size() == 1 && stack_.back().kind == kRootObject;
  }
  bool InMap() const { return !stack_.empty() && stack_.back().kind == kMap; }

  // A value that is not a string where one was due, or a container: VALUE
  // is its preview.
  bool Scalar(const Json& value) {
    Misplaced(JsonPreview(value));
    return true;
  }
  void Misplaced(const std::string& preview) {
    if (AtRoot()) {
      Note(kRoot, FormatError::kIndexBadJson,
           "index must be a JSON object, got " + preview);
    } else if (InRootObject() && key_ == "metadata") {
      Note(kMetadata, FormatError::kIndexBadJson,
           "\"metadata\" must be an object, got " + preview);
    } else if (InMap()) {
      Note(kEntry, FormatError::kIndexBadEntry,
           "weight_map[\"" + entry_->first +
               "\"] must be a file name string, got " + preview);
    }
  }

  bool Open(bool object) {
    if (static_cast<int>(stack_.size()) >= kMaxJsonDepth) {
      return RecordTooDeep(kMaxJsonDepth, error_);
    }
    Kind kind = object ? kObject : kArray;
    std::string name;
    if (AtRoot() && object) {
      kind = kRootObject;
    } else if (InRootObject()) {
      name = key_;
      if (key_ == "weight_map" && object) {
        kind = kMap;
        saw_map_ = true;
      } else if (key_ != "metadata" || !object) {
        Misplaced(object ? "{...}" : "[...]");
      }
    } else {
      if (!stack_.empty()) {
        name = stack_.back().kind == kArray ? stack_.back().name
               : InMap()                    ? entry_->first
                                            : key_;
      }
      Misplaced(object ? "{...}" : "[...]");
    }
    stack_.push_back(Frame{kind, std::move(name), {}});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  bool Duplicate(const std::string& k) {
    return RecordDuplicateKey(
        k, stack_.size() <= 1 ? nullptr : &stack_.back().name, error_);
  }

  // Keeps the problem of highest precedence; the first of equal ones.
  void Note(Problem p, FormatError rule, std::string message) {
    if (p <= problem_) return;
    problem_ = p;
    rule_ = rule;
    message_ = std::move(message);
  }

  ParsedIndex* out_;
  JsonError* error_;
  std::vector<Frame> stack_;
  std::string key_;  // the latest key of a non-weight_map object
  std::map<std::string, std::string>::iterator entry_;  // its latest entry
  bool saw_map_ = false;
  Problem problem_ = kNone;
  FormatError rule_ = FormatError::kNone;
  std::string message_;
};

}  // namespace

std::optional<ParsedIndex> ParseIndexFast(std::string_view text) {
  PlainJson in(text);
  ParsedIndex out;
  bool metadata = false, weight_map = false;
  if (!in.Take('{')) return std::nullopt;
  do {
    std::string_view key;
    if (!in.String(&key) || !in.Take(':')) return std::nullopt;
    if (key == "metadata" && !metadata) {
      metadata = true;
      std::vector<std::string_view> keys;
      if (!in.Take('{')) return std::nullopt;
      if (!in.Take('}')) {
        do {
          std::string_view k, v;
          uint64_t n;
          if (!in.String(&k) || !in.Take(':') ||
              (!in.String(&v) && !in.Unsigned(&n))) {
            return std::nullopt;
          }
          if (std::find(keys.begin(), keys.end(), k) != keys.end() ||
              keys.size() >= 64) {
            return std::nullopt;
          }
          keys.push_back(k);
        } while (in.Take(','));
        if (!in.Take('}')) return std::nullopt;
      }
    } else if (key == "weight_map" && !weight_map) {
      weight_map = true;
      auto& map = out.weight_map;
      if (!in.Take('{')) return std::nullopt;
      do {
        std::string_view tensor, shard;
        if (!in.String(&tensor) || !in.Take(':') || !in.String(&shard) ||
            tensor.empty() || !IsSafeShardName(shard)) {
          return std::nullopt;
        }
        auto [at, added] = AddTensor(map, std::string(tensor));
        if (!added) return std::nullopt;  // a repeated key
        at->second = shard;
      } while (in.Take(','));
      if (!in.Take('}')) return std::nullopt;
    } else {
      return std::nullopt;
    }
  } while (in.Take(','));
  if (!in.Take('}') || !in.AtEnd() || !weight_map) return std::nullopt;
  return out;
}

bool IsSafeShardName(std::string_view name) {
  if (name.empty() || name.front() == '/') return false;
  for (const char c : name) {
    // Control bytes would reach terminals and logs raw; '%', '?', '#' and
    // '\\' change what a URL names, so an http(s) checkpoint's shard could
    // name a file outside its folder ("%2e%2e/x" on a server that decodes).
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '%' || c == '?' || c == '#' ||
        c == '\\') {
      return false;
    }
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    if (name.substr(start, slash - start) == "..") return false;
    start = slash + 1;
  }
  return true;
}

StatusOr<ParsedIndex> ParseIndex(std::span<const std::byte> bytes,
                                 std::string_view label) {
  if (bytes.size() > kMaxHeaderBytes) {
    return Corrupt(FormatError::kIndexTooLarge, label,
                   "index is " + std::to_string(bytes.size()) +
                       " bytes, more than the limit of " +
                       std::to_string(kMaxHeaderBytes));
  }
  size_t bad = 0;
  if (!IsValidUtf8(bytes, &bad)) {
    return Corrupt(FormatError::kIndexBadJson, label,
                   "index is not valid UTF-8 at byte " + std::to_string(bad));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  if (std::optional<ParsedIndex> fast = ParseIndexFast(text)) return *fast;
  JsonError jerr;
  ParsedIndex index;
  IndexReader reader(&index, &jerr);
  if (!SaxParseStrict(text, &reader, &jerr)) {
    return Corrupt(jerr.rule == FormatError::kDuplicateKey
                       ? FormatError::kDuplicateKey
                       : FormatError::kIndexBadJson,
                   label, jerr.message);
  }
  // Precedence as when these were checked on a DOM: the root, "metadata",
  // "weight_map" itself, then its entries.
  using P = IndexReader::Problem;
  if (reader.problem() == P::kRoot || reader.problem() == P::kMetadata) {
    return Corrupt(reader.rule(), label, reader.message());
  }
  if (!reader.saw_map()) {
    return Corrupt(FormatError::kIndexNoWeightMap, label,
                   "index has no \"weight_map\" object");
  }
  if (reader.problem() == P::kEntry) {
    return Corrupt(reader.rule(), label, reader.message());
  }
  if (index.weight_map.empty()) {
    // Loading it would succeed with nothing loaded: a truncated or
    // placeholder index, not a checkpoint.
    return Corrupt(FormatError::kIndexNoWeightMap, label,
                   "index's \"weight_map\" lists no tensors");
  }
  return index;
}

}  // namespace weightlift::internal
