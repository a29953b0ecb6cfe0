// libFuzzer target: the model.safetensors.index.json parser on arbitrary
// bytes. On success every shard name must be a safe relative path.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "format/index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                   size);
  auto index = weightlift::internal::ParseIndex(bytes, "fuzz.index.json");
  if (index.ok()) {
    for (const auto& [tensor, shard] : index->weight_map) {
      if (tensor.empty() || !weightlift::internal::IsSafeShardName(shard)) {
        std::abort();
      }
      if (shard.find("..") != std::string::npos &&
          (shard == ".." || shard.starts_with("../") ||
           shard.find("/../") != std::string::npos || shard.ends_with("/.."))) {
        std::abort();
      }
    }
  } else if (index.status().rule() == weightlift::FormatError::kNone) {
    std::abort();
  }
  return 0;
}
