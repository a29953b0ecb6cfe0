// Load() with LoadOptions::zero_copy on the host: the tensors are views of a
// private, writable (copy-on-write) mapping of each file, as plain
// safetensors hands out on cpu. Nothing is read at load time; pages come
// from the page cache (or storage) when first touched, and a write to a
// tensor copies that page instead of changing the file.
//
// Why opt-in: a mapped tensor depends on the file after the load. If the
// file is truncated while a tensor lives, touching it raises SIGBUS, and
// changes to the file may show through pages not yet written. The default
// Load() copies into memory the loader owns and has neither risk.
//
// Tensors are aligned as the file lays them out (safetensors data starts
// 8-byte aligned), not to 64 bytes. A tensor whose address would not be a
// multiple of its element size is copied into owned memory instead; the
// report counts those.
#pragma once

#include <cstdint>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// TENSORS: indices into ckpt.tensors() in request order. Fills
// result.tensors and result.report (device cpu, path "mmap-view" per file).
// NotFound / IoError naming the file when it cannot be opened or mapped, or
// (IoError) when its size differs from the size its header was read at.
StatusOr<LoadResult> LoadMapped(const Checkpoint& ckpt,
                                const std::vector<uint32_t>& tensors);

}  // namespace weightlift::internal
