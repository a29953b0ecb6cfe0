#include "format/synth.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "format/writer.h"
#include "util/fnv.h"

namespace weightlift::internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "SynthFill defines bytes as little-endian words");

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
// Clears bit 14 of each 16-bit lane: the top exponent bit of BF16/F16 (and of
// the upper lane of F32/F64), so no value is Inf or NaN.
constexpr uint64_t kFiniteMask = 0xBFFFBFFFBFFFBFFFull;

inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t Word(uint64_t tensor_seed, uint64_t i) {
  return Mix(tensor_seed + (i + 1) * kGolden) & kFiniteMask;
}

}  // namespace

uint64_t SynthTensorSeed(uint64_t seed, std::string_view name) {
  Fnv f;
  f.Bytes(name.data(), name.size());
  return Mix(seed ^ Mix(f.h));
}

void SynthFill(uint64_t tensor_seed, uint64_t offset,
               std::span<std::byte> out) {
  std::byte* p = out.data();
  size_t left = out.size();
  uint64_t w = offset / 8;
  const size_t skip = offset % 8;
  if (skip != 0 && left > 0) {
    const uint64_t word = Word(tensor_seed, w++);
    const size_t n = std::min(left, 8 - skip);
    std::memcpy(p, reinterpret_cast<const std::byte*>(&word) + skip, n);
    p += n;
    left -= n;
  }
  for (; left >= 8; left -= 8, p += 8) {
    const uint64_t word = Word(tensor_seed, w++);
    std::memcpy(p, &word, 8);
  }
  if (left > 0) {
    const uint64_t word = Word(tensor_seed, w);
    std::memcpy(p, &word, left);
  }
}

StatusOr<std::vector<std::vector<SynthTensor>>> SplitIntoShards(
    const std::vector<SynthTensor>& tensors, int num_shards) {
  // Units in order with their bytes.
  std::vector<int> unit_ids;
  std::vector<uint64_t> unit_bytes;
  uint64_t total = 0;
  for (const SynthTensor& t : tensors) {
    if (unit_ids.empty() || unit_ids.back() != t.unit) {
      unit_ids.push_back(t.unit);
      unit_bytes.push_back(0);
    }
    unit_bytes.back() += t.bytes;
    total += t.bytes;
  }
  const int units = static_cast<int>(unit_ids.size());
  if (num_shards < 1 || num_shards > units) {
    return Status::InvalidArgument("cannot split " + std::to_string(units) +
                                   " layers into " +
                                   std::to_string(num_shards) + " shards (1.." +
                                   std::to_string(units) + ")");
  }
  // Greedy on cumulative bytes: a unit starts the next shard when its middle
  // lies past the current shard's share, or when every remaining shard needs
  // one of the remaining units.
  const double target = static_cast<double>(total) / num_shards;
  std::vector<int> shard_of_unit(units);
  int k = 0;
  uint64_t cum = 0;
  bool current_empty = true;
  for (int u = 0; u < units; ++u) {
    const double mid = static_cast<double>(cum) + unit_bytes[u] / 2.0;
    if (!current_empty && k < num_shards - 1 &&
        (mid > target * (k + 1) || units - u == num_shards - 1 - k)) {
      ++k;
    }
    shard_of_unit[u] = k;
    current_empty = false;
    cum += unit_bytes[u];
  }
  std::vector<std::vector<SynthTensor>> shards(num_shards);
  int u = -1;
  int last_unit = -1;
  for (const SynthTensor& t : tensors) {
    if (t.unit != last_unit || u < 0) {
      ++u;
      last_unit = t.unit;
    }
    shards[shard_of_unit[u]].push_back(t);
  }
  return shards;
}

Status Synthesize(std::string_view layout, int num_shards,
                  const std::string& dir, uint64_t seed) {
  WL_ASSIGN_OR_RETURN(std::vector<SynthTensor> tensors, LayoutTensors(layout));
  WL_ASSIGN_OR_RETURN(auto shards, SplitIntoShards(tensors, num_shards));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Status::IoErrorFromErrno(dir + ": creating the directory",
                                    ec.value());
  }
  std::vector<std::vector<TensorToWrite>> to_write;
  for (const auto& shard : shards) {
    std::vector<TensorToWrite> files;
    for (const SynthTensor& t : shard) {
      TensorToWrite w;
      w.name = t.name;
      w.dtype = t.dtype;
      w.shape = t.shape;
      const uint64_t ts = SynthTensorSeed(seed, t.name);
      w.generate = [ts](uint64_t off, std::span<std::byte> out) {
        SynthFill(ts, off, out);
      };
      files.push_back(std::move(w));
    }
    to_write.push_back(std::move(files));
  }
  WriteOptions options;
  options.metadata = {{"format", "pt"}};
  if (num_shards == 1) {
    return WriteSafetensors(
        (std::filesystem::path(dir) / "model.safetensors").string(),
        std::move(to_write[0]), options);
  }
  return WriteShardedCheckpoint(dir, std::move(to_write), options);
}

}  // namespace weightlift::internal
