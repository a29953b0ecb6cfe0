#include "dist/group_exec.h"

#include <string>

namespace weightlift::internal {

std::vector<Collective> BatchCollectives(const GroupPlan& plan,
                                         std::span<const TensorInfo> tensors,
                                         uint32_t batch,
                                         std::span<void* const> buffers) {
  std::vector<Collective> out;
  for (const GroupStep& s : plan.steps) {
    if (s.batch != batch || s.delivery == Delivery::kLocal) continue;
    const TensorInfo& t = tensors[s.tensor];
    if (t.size == 0) continue;
    Collective c;
    c.tensor = s.tensor;
    c.data = buffers[s.tensor];
    if (s.delivery == Delivery::kBroadcast) {
      c.kind = Collective::Kind::kBroadcast;
      c.bytes = t.size;
      c.root = s.root;
    } else {
      c.kind = Collective::Kind::kAllGather;
      c.bytes = s.part_bytes;
    }
    out.push_back(c);
  }
  return out;
}

Status RunBatch(const GroupPlan& plan, std::span<const TensorInfo> tensors,
                uint32_t batch, std::span<void* const> buffers,
                GroupTransport& transport) {
  const std::vector<Collective> cs =
      BatchCollectives(plan, tensors, batch, buffers);
  const std::vector<GroupCollective> list(cs.begin(), cs.end());
  size_t failed = cs.size();
  Status s = transport.RunAll(list, &failed);
  if (s.ok()) return s;
  if (failed >= cs.size()) {
    return Status(s.code(), "group load: the collectives of batch " +
                                std::to_string(batch) + ": " + s.message());
  }
  const TensorInfo& t = tensors[cs[failed].tensor];
  return Status(s.code(), "group load: tensor '" + t.name + "' (" +
                              std::to_string(t.size) +
                              " bytes): " + s.message());
}

}  // namespace weightlift::internal

namespace weightlift {

Status GroupTransport::RunAll(std::span<const GroupCollective> collectives,
                              size_t* failed) {
  for (size_t k = 0; k < collectives.size(); ++k) {
    const GroupCollective& c = collectives[k];
    Status s = c.kind == GroupCollective::Kind::kBroadcast
                   ? Broadcast(c.data, c.bytes, c.root)
                   : AllGather(c.data, c.bytes);
    if (!s.ok()) {
      if (failed) *failed = k;
      return s;
    }
  }
  return Status::OK();
}

}  // namespace weightlift
