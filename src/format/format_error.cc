// FormatErrorName. Compiled into wl_util (see src/format/CMakeLists.txt)
// because Status::ToString in wl_util calls it, and libraries that depend only
// on wl_util must still link.
#include "weightlift/format_error.h"

namespace weightlift {

const char* FormatErrorName(FormatError e) {
  switch (e) {
    case FormatError::kNone:
      return "none";
    case FormatError::kFileTooSmall:
      return "file_too_small";
    case FormatError::kHeaderTooLarge:
      return "header_too_large";
    case FormatError::kHeaderPastEof:
      return "header_past_eof";
    case FormatError::kHeaderNotUtf8:
      return "header_not_utf8";
    case FormatError::kHeaderBadJson:
      return "header_bad_json";
    case FormatError::kHeaderNotObject:
      return "header_not_object";
    case FormatError::kDuplicateKey:
      return "duplicate_key";
    case FormatError::kEntryNotObject:
      return "entry_not_object";
    case FormatError::kMissingField:
      return "missing_field";
    case FormatError::kUnknownField:
      return "unknown_field";
    case FormatError::kBadDtype:
      return "bad_dtype";
    case FormatError::kBadShape:
      return "bad_shape";
    case FormatError::kBadOffsets:
      return "bad_offsets";
    case FormatError::kRankTooLarge:
      return "rank_too_large";
    case FormatError::kSizeOverflow:
      return "size_overflow";
    case FormatError::kSubByteMisaligned:
      return "sub_byte_misaligned";
    case FormatError::kSizeMismatch:
      return "size_mismatch";
    case FormatError::kRangeGap:
      return "range_gap";
    case FormatError::kRangeOverlap:
      return "range_overlap";
    case FormatError::kTrailingBytes:
      return "trailing_bytes";
    case FormatError::kDataPastEof:
      return "data_past_eof";
    case FormatError::kBadMetadata:
      return "bad_metadata";
    case FormatError::kTooManyTensors:
      return "too_many_tensors";
    case FormatError::kEmptyName:
      return "empty_name";
    case FormatError::kIndexBadJson:
      return "index_bad_json";
    case FormatError::kIndexNoWeightMap:
      return "index_no_weight_map";
    case FormatError::kIndexBadEntry:
      return "index_bad_entry";
    case FormatError::kIndexUnsafePath:
      return "index_unsafe_path";
    case FormatError::kIndexMissingShard:
      return "index_missing_shard";
    case FormatError::kIndexTensorMissing:
      return "index_tensor_missing";
    case FormatError::kIndexTensorExtra:
      return "index_tensor_extra";
    case FormatError::kDuplicateTensor:
      return "duplicate_tensor";
    case FormatError::kIndexTooLarge:
      return "index_too_large";
  }
  return "unknown_format_error";
}

}  // namespace weightlift
