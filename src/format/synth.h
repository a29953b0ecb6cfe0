// Synthetic checkpoints with the real Hugging Face names, shapes and dtypes of
// known models (random data), for tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/dtype.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct SynthTensor {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<uint64_t> shape;
  // Sharding unit: 0 = embeddings, 1..L = decoder layer L-1, L+1 = final
  // norm and lm_head. Shards only split between units.
  int unit = 0;
  uint64_t bytes = 0;
};

struct LayoutSummary {
  std::string name;         // "llama2-7b", ...
  std::string description;  // "Llama-2-7B: 32 layers, hidden 4096, ..."
  uint64_t num_tensors = 0;
  uint64_t num_params = 0;
  uint64_t total_bytes = 0;  // tensor bytes (headers not counted)
};

// Every layout: llama2-7b, llama2-13b, llama3-8b, tinyllama-1.1b, tiny.
std::vector<LayoutSummary> ListLayouts();

// The tensors of LAYOUT in state-dict order. InvalidArgument (listing the
// known layouts) for an unknown name.
StatusOr<std::vector<SynthTensor>> LayoutTensors(std::string_view layout);

// Splits TENSORS (state-dict order) into NUM_SHARDS non-empty contiguous
// groups of whole units, balanced by bytes. InvalidArgument when NUM_SHARDS
// is < 1 or more than the number of units.
StatusOr<std::vector<std::vector<SynthTensor>>> SplitIntoShards(
    const std::vector<SynthTensor>& tensors, int num_shards);

// The data: byte O of tensor NAME is a pure function of (SEED, NAME, O), so
// a loader's output can be checked without a reference copy. Random 64-bit
// words from splitmix64, with bit 14 of every 16-bit lane cleared so every
// BF16/F16/F32/F64 value is finite (no NaN: torch.equal works).
uint64_t SynthTensorSeed(uint64_t seed, std::string_view name);
void SynthFill(uint64_t tensor_seed, uint64_t offset, std::span<std::byte> out);

// Writes LAYOUT into DIR (created if needed) with data from SEED. One shard:
// DIR/model.safetensors, no index (as Hugging Face does). Several:
// DIR/model-0000K-of-0000N.safetensors split by layer and balanced by bytes,
// plus DIR/model.safetensors.index.json. __metadata__ is {"format": "pt"}.
Status Synthesize(std::string_view layout, int num_shards,
                  const std::string& dir, uint64_t seed);

}  // namespace weightlift::internal
