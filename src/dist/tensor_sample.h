// A sample of a checkpoint's tensor bytes, for a group's agreement.
//
// The group fingerprint (plan/group_plan.h) covers the checkpoint's layout:
// names, dtypes, shapes, offsets, file sizes. Two checkpoints of one layout
// with different weights (two fine-tunes of one model; a stale copy on one
// host) have the same layout, and ranks that opened one each would build
// one state dict out of both. The sample folded into the fingerprint tells
// them apart: 16 bytes from the middle of up to 64 tensors, spread evenly
// over the tensors in checkpoint order (all of them when there are fewer),
// read before any data moves. A full fine-tune changes every tensor; one
// that changed only some (say q and v projections, 2 of every 9) is caught
// unless every sampled tensor is one it left alone.
#pragma once

#include <span>
#include <string>

#include "weightlift/checkpoint.h"
#include "weightlift/status.h"

namespace weightlift::internal {

inline constexpr size_t kSampledTensors = 64;
inline constexpr uint64_t kSampleBytes = 16;

// The sampled bytes of TENSORS (tensors of HOLDER or of a selection of it:
// TensorInfo::file indexes HOLDER's files), concatenated, read through the
// files HOLDER holds open: one after another, or up to 8 at once when the
// first read took longer than a local one (a remote checkpoint pays round
// trips, not bandwidth). Empty tensors add nothing. A checkpoint built by
// hand (no held files) gives an empty sample. IoError naming the file and
// tensor when a read fails.
StatusOr<std::string> SampleTensorBytes(const Checkpoint& holder,
                                        std::span<const TensorInfo> tensors);

}  // namespace weightlift::internal
