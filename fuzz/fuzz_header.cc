// libFuzzer target: the safetensors header parser on arbitrary bytes.
//
// Each input is tried two ways: as a whole file image (8-byte length prefix,
// header, data), and as bare header JSON with a matching prefix and no data,
// which lets the fuzzer reach the per-tensor rules without guessing lengths.
// On success the invariants a loader relies on are checked.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "format/header.h"

namespace {

using weightlift::internal::ParsedHeader;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckInvariants(const ParsedHeader& h) {
  Check(h.data_offset == 8 + h.header_size);
  uint64_t expected = 0;
  for (const auto& t : h.tensors) {
    Check(!t.name.empty());
    Check(t.begin == expected);
    Check(t.begin <= t.end);
    Check(t.shape.size() <= static_cast<size_t>(weightlift::kMaxRank));
    auto bytes = weightlift::internal::TensorBytes(t.shape, t.dtype, t.name);
    Check(bytes.ok() && *bytes == t.end - t.begin);
    expected = t.end;
  }
  Check(h.data_offset + expected == h.file_size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                   size);
  auto image = weightlift::internal::ParseFileImage(bytes, "fuzz");
  if (image.ok()) {
    CheckInvariants(*image);
  } else {
    Check(image.status().code() == weightlift::StatusCode::kCorruption);
    Check(image.status().rule() != weightlift::FormatError::kNone);
  }
  auto json = weightlift::internal::ParseHeader(bytes, size, 8 + size, "fuzz");
  if (json.ok()) {
    CheckInvariants(*json);
  } else {
    Check(json.status().rule() != weightlift::FormatError::kNone ||
          size > weightlift::kMaxHeaderBytes);
  }
  return 0;
}
