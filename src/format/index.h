// Parsing of model.safetensors.index.json, from bytes.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "weightlift/status.h"

namespace weightlift::internal {

struct ParsedIndex {
  // tensor name -> shard file name (relative to the index's directory).
  std::map<std::string, std::string> weight_map;
};

// Validates an index: UTF-8 JSON object (kIndexBadJson; kDuplicateKey for a
// repeated key anywhere), a "weight_map" object (kIndexNoWeightMap) whose
// keys are non-empty and whose values are strings (kIndexBadEntry) naming a
// shard by a safe relative path (kIndexUnsafePath: empty, absolute, a ".."
// component or a NUL byte). An optional "metadata" must be an object; other
// top-level keys are tolerated. BYTES larger than kMaxHeaderBytes fail with
// kIndexTooLarge. LABEL names the file in messages.
StatusOr<ParsedIndex> ParseIndex(std::span<const std::byte> bytes,
                                 std::string_view label);

// The fast path ParseIndex takes first: the index as writers write it, in
// one pass, without a parser's events. An object of "metadata" (an object of
// plain strings and integers) and "weight_map" (plain strings to safe shard
// names), each at most once, nothing else, no escapes. At anything outside
// that, or anything the rules refuse, it declines (nullopt) and the strict
// reader decides and names the error; what it accepts, the strict reader
// accepts with the same weight_map (index_test.cc holds the two to that on
// mutated indexes). TEXT must be valid UTF-8 (checked before).
std::optional<ParsedIndex> ParseIndexFast(std::string_view text);

// True when NAME is a relative path with no ".." component, not empty, with
// no control character and none of '%', '?', '#', '\\' (characters that
// change what a URL names when the checkpoint is read over http(s)).
bool IsSafeShardName(std::string_view name);

}  // namespace weightlift::internal
