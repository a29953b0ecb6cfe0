#include "format/index.h"

#include <utility>

#include "format/json_reader.h"
#include "weightlift/format_error.h"

namespace weightlift::internal {
namespace {

Status Corrupt(FormatError rule, std::string_view label, std::string msg) {
  return Status::Corruption(rule, std::string(label) + ": " + std::move(msg));
}

}  // namespace

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
  JsonError jerr;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  nlohmann::json root = ParseStrictJson(text, kMaxJsonDepth, &jerr);
  if (jerr.rule == FormatError::kDuplicateKey) {
    return Corrupt(jerr.rule, label, jerr.message);
  }
  if (jerr.rule != FormatError::kNone) {
    return Corrupt(FormatError::kIndexBadJson, label, jerr.message);
  }
  if (!root.is_object()) {
    return Corrupt(FormatError::kIndexBadJson, label,
                   "index must be a JSON object, got " + JsonPreview(root));
  }
  if (root.contains("metadata") && !root["metadata"].is_object()) {
    return Corrupt(
        FormatError::kIndexBadJson, label,
        "\"metadata\" must be an object, got " + JsonPreview(root["metadata"]));
  }
  if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
    return Corrupt(FormatError::kIndexNoWeightMap, label,
                   "index has no \"weight_map\" object");
  }
  ParsedIndex index;
  for (const auto& [tensor, shard] : root["weight_map"].items()) {
    if (tensor.empty()) {
      return Corrupt(FormatError::kIndexBadEntry, label,
                     "weight_map has an empty tensor name");
    }
    if (!shard.is_string()) {
      return Corrupt(FormatError::kIndexBadEntry, label,
                     "weight_map[\"" + tensor +
                         "\"] must be a file name string, got " +
                         JsonPreview(shard));
    }
    std::string name = shard.get<std::string>();
    if (!IsSafeShardName(name)) {
      return Corrupt(FormatError::kIndexUnsafePath, label,
                     "weight_map[\"" + tensor + "\"] names shard \"" + name +
                         "\": shard names must be relative paths without "
                         "'..' components, control characters, '%', '?', "
                         "'#' or '\\'");
    }
    index.weight_map.emplace(tensor, std::move(name));
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
