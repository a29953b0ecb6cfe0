// Synthetic checkpoints for `synth` and `demo`: the shard counts of the
// published checkpoints, and the generate-once cache `demo` uses.
#pragma once

#include <cstdint>
#include <string>

#include "weightlift/status.h"

namespace weightlift::cli {

// Shards of the published Hugging Face checkpoint of LAYOUT (llama2-7b: 2,
// llama2-13b: 3, llama3-8b: 4, others 1).
int PublishedShards(const std::string& layout);

// "llama2-7b, llama2-13b, llama3-8b, tinyllama-1.1b, tiny" from the format
// library's list.
std::string LayoutNames();

// Writes LAYOUT into DIR (see internal::Synthesize) and checks that the
// result opens as a checkpoint. Refuses when the file system lacks the room.
Status SynthesizeChecked(const std::string& layout, int shards,
                         const std::string& dir, uint64_t seed);

// The default cache folder: $XDG_CACHE_HOME/weightlift/synth/LAYOUT, else
// $HOME/.cache/weightlift/synth/LAYOUT.
StatusOr<std::string> DefaultCacheDir(const std::string& layout);

// Whether DIR holds a finished generation of LAYOUT/SHARDS/SEED.
bool SynthCached(const std::string& layout, int shards, uint64_t seed,
                 const std::string& dir);

// Makes sure DIR holds LAYOUT/SHARDS/SEED, generating it only when it does
// not already (a marker file written last records a finished generation).
// *GENERATED says whether it was written now. Refuses to write into a
// non-empty folder that holds anything but a synthetic checkpoint.
Status EnsureSynthCached(const std::string& layout, int shards, uint64_t seed,
                         const std::string& dir, bool* generated);

}  // namespace weightlift::cli
