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
  for (const Collective& c : BatchCollectives(plan, tensors, batch, buffers)) {
    Status s = c.kind == Collective::Kind::kBroadcast
                   ? transport.Broadcast(c.data, c.bytes, c.root)
                   : transport.AllGather(c.data, c.bytes);
    if (!s.ok()) {
      return Status(s.code(), "group load: tensor '" + tensors[c.tensor].name +
                                  "' (" +
                                  std::to_string(tensors[c.tensor].size) +
                                  " bytes): " + s.message());
    }
  }
  return Status::OK();
}

}  // namespace weightlift::internal
