// Running a group plan's collectives over a GroupTransport.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plan/group_plan.h"
#include "weightlift/checkpoint.h"
#include "weightlift/group.h"

namespace weightlift::internal {

// One collective of a batch, as a transport is asked for it.
struct Collective {
  enum class Kind : uint8_t { kBroadcast, kAllGather };
  Kind kind = Kind::kBroadcast;
  uint32_t tensor = 0;
  void* data = nullptr;  // the tensor's whole buffer on this rank
  uint64_t bytes = 0;    // broadcast: the tensor's bytes; all-gather: a part
  int root = -1;         // broadcast only
};

// The collectives of BATCH in the order every rank issues them (the steps'
// order; local and empty tensors need none). BUFFERS[i] is tensor i's
// whole buffer on this rank (nullptr for local tensors).
std::vector<Collective> BatchCollectives(const GroupPlan& plan,
                                         std::span<const TensorInfo> tensors,
                                         uint32_t batch,
                                         std::span<void* const> buffers);

// Issues BATCH's collectives on TRANSPORT; the first error stops the rest
// and names the tensor.
Status RunBatch(const GroupPlan& plan, std::span<const TensorInfo> tensors,
                uint32_t batch, std::span<void* const> buffers,
                GroupTransport& transport);

}  // namespace weightlift::internal
