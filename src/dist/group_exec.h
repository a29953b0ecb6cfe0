// Running a group plan's collectives over a GroupTransport.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plan/group_plan.h"
#include "weightlift/checkpoint.h"
#include "weightlift/group.h"

namespace weightlift::internal {

// One collective of a batch, as a transport is asked for it (DATA: the
// tensor's whole buffer on this rank), and the tensor it delivers.
struct Collective : GroupCollective {
  uint32_t tensor = 0;
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
