// Parsing and validation of one safetensors header, from bytes.
//
// The parser never sees tensor data: it needs the header bytes, the value of
// the 8-byte length prefix and the file size. Every rule of docs/format.md
// that concerns one file is enforced here; each broken rule returns
// Status::Corruption with its FormatError code and a message that names the
// file, the tensor, the offsets and the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/dtype.h"
#include "weightlift/status.h"

namespace weightlift::internal {

class File;

struct ParsedTensor {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data buffer
  uint64_t end = 0;    // exclusive
};

struct ParsedHeader {
  uint64_t header_size = 0;  // N
  uint64_t data_offset = 0;  // 8 + N
  uint64_t file_size = 0;
  std::vector<ParsedTensor> tensors;            // sorted by (begin, end)
  std::map<std::string, std::string> metadata;  // __metadata__
  bool has_metadata = false;  // the header has a __metadata__ key (maybe {})
};

// Limits beyond those the framing enforces. Tests lower them to reach the
// rule without building a gigantic header.
struct ParseLimits {
  uint64_t max_tensors = kMaxTensors;
};

// Validates everything about a file that its first 8 + N bytes can tell.
// JSON: the N header bytes (must be exactly HEADER_LEN_FIELD bytes long, else
// InvalidArgument: a caller bug). FILE_SIZE: the file's size in bytes.
// FILE_LABEL: how messages name the file.
StatusOr<ParsedHeader> ParseHeader(std::span<const std::byte> json,
                                   uint64_t header_len_field,
                                   uint64_t file_size,
                                   std::string_view file_label,
                                   const ParseLimits& limits = {});

// Parses a whole file held in memory (FILE = every byte of it): the 8-byte
// prefix, then ParseHeader. Used by tests and the fuzzer.
StatusOr<ParsedHeader> ParseFileImage(std::span<const std::byte> file,
                                      std::string_view file_label,
                                      const ParseLimits& limits = {});

// ParseHeader's two readers of the entries of the header text TEXT (valid
// UTF-8): each fills H's tensors (unsorted), metadata and has_metadata.
// ParseEntriesStrict is the reference: nlohmann's strict SAX parser and a
// walk over its DOM; every error of the entries (kHeaderBadJson through
// kSizeMismatch) is its, naming FILE_LABEL. ParseEntriesFast reads only the
// plain header writers write (no escapes, integers as digits, every entry
// valid) in one pass and returns false at anything else, leaving H to be
// cleared; what it accepts the strict reader accepts with the same result.
bool ParseEntriesFast(std::string_view text, const ParseLimits& limits,
                      ParsedHeader* h);
Status ParseEntriesStrict(std::string_view text, std::string_view file_label,
                          const ParseLimits& limits, ParsedHeader* h);

// Checks only the framing: FILE_SIZE >= 8, N <= kMaxHeaderBytes and
// 8 + N <= FILE_SIZE. Lets a reader refuse before allocating N bytes.
Status CheckFraming(uint64_t header_len_field, uint64_t file_size,
                    std::string_view file_label);

// Bytes of a tensor of SHAPE and DTYPE. Fails with kSizeOverflow when the
// element count times the bit size overflows 64 bits, kSubByteMisaligned when
// the bits don't fill whole bytes. WHAT names the tensor in messages.
StatusOr<uint64_t> TensorBytes(std::span<const uint64_t> shape, DType dtype,
                               std::string_view what);

// Reads just the first 8 + N bytes of FILE (never tensor data) and parses
// them. IoError naming the file when a read fails.
StatusOr<ParsedHeader> ReadHeader(File& file);
// ReadHeader of PATH opened through Env::Default() (tests).
StatusOr<ParsedHeader> ReadHeaderFile(const std::string& path);

}  // namespace weightlift::internal
