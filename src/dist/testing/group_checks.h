// Test helpers for group loads: a synthesized checkpoint in a temporary
// folder, a file's bytes, and the bytes a rank's part of a tensor must
// hold (gathered from the file with the part's run geometry), so every
// group test compares against the file itself, not against another load.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/synth.h"
#include "weightlift/checkpoint.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift::internal::testing {

// The "tiny" layout in two shards under a fresh temporary folder, removed
// on destruction. SEED picks the weights (same seed, same bytes). A
// failure to make it fails the test.
struct SynthDir {
  std::string path;
  explicit SynthDir(uint64_t seed = 7) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "wl_dist_XXXXXX").string();
    EXPECT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
    path = tmpl;
    Status s = Synthesize("tiny", 2, path, seed);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~SynthDir() { std::filesystem::remove_all(path); }
  SynthDir(const SynthDir&) = delete;
  SynthDir& operator=(const SynthDir&) = delete;
};

inline std::vector<uint8_t> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Every file of CKPT, as FileBytes, in the checkpoint's order.
inline std::vector<std::vector<uint8_t>> FilesOf(const Checkpoint& ckpt) {
  std::vector<std::vector<uint8_t>> files;
  for (const auto& f : ckpt.files()) files.push_back(FileBytes(f.path));
  return files;
}

// A plan over the tiny layout with both splits: dim 0 and the last dim.
inline std::vector<TpPlanEntry> SplitBothWaysPlan() {
  return {{"*.q_proj.weight", ShardStyle::kColwise},
          {"*.o_proj.weight", ShardStyle::kRowwise},
          {"*.down_proj.weight", ShardStyle::kRowwise},
          {"*.up_proj.weight", ShardStyle::kColwise}};
}

// The bytes of SHARD of T, gathered from FILE (T's file) run by run.
inline std::vector<uint8_t> PartBytes(const std::vector<uint8_t>& file,
                                      const TensorInfo& t,
                                      const TensorShard& s) {
  std::vector<uint8_t> out;
  out.reserve(s.bytes);
  for (uint64_t k = 0; k < s.runs; ++k) {
    const uint64_t at = t.offset + s.first_byte + k * s.run_stride;
    out.insert(out.end(), file.begin() + static_cast<long>(at),
               file.begin() + static_cast<long>(at + s.run_bytes));
  }
  return out;
}

}  // namespace weightlift::internal::testing
