// FormatError: one code per rule of the safetensors format that weightlift
// enforces. docs/format.md lists every rule with its code; keep the two in
// step. Codes are stable: append, never renumber.
#pragma once

#include <cstdint>

namespace weightlift {

enum class FormatError : uint16_t {
  kNone = 0,
  // File framing.
  kFileTooSmall = 1,     // fewer than 8 bytes
  kHeaderTooLarge = 2,   // N > 100,000,000
  kHeaderPastEof = 3,    // 8 + N beyond the end of the file
  kHeaderNotUtf8 = 4,    // header bytes are not valid UTF-8
  kHeaderBadJson = 5,    // not parseable JSON (incl. NUL bytes, nesting)
  kHeaderNotObject = 6,  // top level is not a JSON object
  kDuplicateKey = 7,     // a key appears twice in an object
  // Per-tensor entries.
  kEntryNotObject = 8,      // a tensor entry is not an object
  kMissingField = 9,        // dtype, shape or data_offsets missing
  kUnknownField = 10,       // a field the format does not define
  kBadDtype = 11,           // dtype not a string or not a known dtype
  kBadShape = 12,           // shape not an array of non-negative integers
  kBadOffsets = 13,         // data_offsets not [begin, end], begin <= end
  kRankTooLarge = 14,       // more dimensions than kMaxRank
  kSizeOverflow = 15,       // element count x bits overflows 64 bits
  kSubByteMisaligned = 16,  // sub-byte dtype not ending on a byte boundary
  kSizeMismatch = 17,       // end - begin != shape x dtype size
  kRangeGap = 18,           // sorted ranges leave a gap (or don't start at 0)
  kRangeOverlap = 19,       // sorted ranges overlap
  kTrailingBytes = 20,      // bytes after the last tensor
  kDataPastEof = 21,        // last end + 8 + N beyond the end of the file
  kBadMetadata = 22,        // __metadata__ not a string -> string object
  kTooManyTensors = 23,     // more than kMaxTensors entries
  kEmptyName = 24,          // a tensor name is the empty string
  // Sharded checkpoints (model.safetensors.index.json).
  kIndexBadJson = 30,        // the index is not valid JSON
  kIndexNoWeightMap = 31,    // no weight_map object
  kIndexBadEntry = 32,       // a weight_map value is not a string
  kIndexUnsafePath = 33,     // shard name absolute or with a '..' component
  kIndexMissingShard = 34,   // a shard named in the index does not exist
  kIndexTensorMissing = 35,  // a tensor of the index is not in its shard
  kIndexTensorExtra = 36,    // a tensor of a shard is not in the index
  kDuplicateTensor = 37,     // the same tensor name in two files
  kIndexTooLarge = 38,       // index file larger than the header limit
};

// Stable snake_case name of the rule, e.g. "range_overlap".
const char* FormatErrorName(FormatError e);

// Limits enforced by the parser.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
inline constexpr int kMaxRank = 64;
inline constexpr uint64_t kMaxTensors = 10'000'000;
inline constexpr int kMaxJsonDepth = 64;

}  // namespace weightlift
