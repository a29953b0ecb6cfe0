// libFuzzer target: the safetensors header parser on arbitrary bytes.
//
// Each input is tried two ways: as a whole file image (8-byte length prefix,
// header, data), and as bare header JSON with a matching prefix and no data,
// which lets the fuzzer reach the per-tensor rules without guessing lengths.
// On success the invariants a loader relies on are checked. Each valid
// UTF-8 input is also given to both readers of the entries: whatever the
// one-pass reader (ParseEntriesFast) accepts, the strict reader must accept
// with the same tensors and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "format/header.h"
#include "format/json_reader.h"

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

// ParseEntriesFast accepts only what ParseEntriesStrict accepts alike.
void CheckReadersAgree(std::span<const std::byte> bytes) {
  size_t bad;
  if (!weightlift::internal::IsValidUtf8(bytes, &bad)) return;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()),
                              bytes.size());
  ParsedHeader fast, strict;
  if (!weightlift::internal::ParseEntriesFast(text, {}, &fast)) return;
  Check(
      weightlift::internal::ParseEntriesStrict(text, "fuzz", {}, &strict).ok());
  auto key = [](const ParsedHeader& h) {
    std::vector<
        std::tuple<std::string, int, std::vector<uint64_t>, uint64_t, uint64_t>>
        out;
    for (const auto& t : h.tensors) {
      out.emplace_back(t.name, static_cast<int>(t.dtype), t.shape, t.begin,
                       t.end);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  Check(key(fast) == key(strict));
  Check(fast.metadata == strict.metadata);
  Check(fast.has_metadata == strict.has_metadata);
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
  if (size <= weightlift::kMaxHeaderBytes) CheckReadersAgree(bytes);
  auto json = weightlift::internal::ParseHeader(bytes, size, 8 + size, "fuzz");
  if (json.ok()) {
    CheckInvariants(*json);
  } else {
    Check(json.status().rule() != weightlift::FormatError::kNone ||
          size > weightlift::kMaxHeaderBytes);
  }
  return 0;
}
