#include "exec/request.h"

#include <string_view>
#include <unordered_set>

namespace weightlift::internal {

StatusOr<std::vector<uint32_t>> ResolveNames(
    const Checkpoint& ckpt, std::span<const std::string> names) {
  std::vector<uint32_t> out;
  if (names.empty()) {
    out.resize(ckpt.tensors().size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i);
    return out;
  }
  out.reserve(names.size());
  std::unordered_set<std::string_view> seen;
  for (const std::string& name : names) {
    const int64_t i = ckpt.IndexOf(name);
    if (i < 0) {
      return Status::NotFound("tensor '" + name + "' is not in the checkpoint");
    }
    if (!seen.insert(name).second) {
      return Status::InvalidArgument("tensor '" + name +
                                     "' is requested twice");
    }
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

StatusOr<std::vector<uint32_t>> ResolveDestinations(
    const Checkpoint& ckpt, std::span<const Destination> dests) {
  std::vector<uint32_t> out;
  out.reserve(dests.size());
  std::unordered_set<std::string_view> seen;
  for (const Destination& d : dests) {
    const int64_t i = ckpt.IndexOf(d.name);
    if (i < 0) {
      return Status::NotFound("destination for tensor '" + d.name +
                              "', which is not in the checkpoint");
    }
    if (!seen.insert(d.name).second) {
      return Status::InvalidArgument("tensor '" + d.name +
                                     "' has two destinations");
    }
    const TensorInfo& t = ckpt.tensors()[static_cast<size_t>(i)];
    if (d.size != t.size) {
      return Status::InvalidArgument("destination for tensor '" + d.name +
                                     "' has " + std::to_string(d.size) +
                                     " bytes but the tensor has " +
                                     std::to_string(t.size));
    }
    if (d.data == nullptr && d.size != 0) {
      return Status::InvalidArgument("destination for tensor '" + d.name +
                                     "' is a null pointer (" +
                                     std::to_string(d.size) + " bytes)");
    }
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

StatusOr<std::vector<TensorSelection>> ResolveRequests(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests) {
  std::vector<TensorSelection> out;
  out.reserve(requests.size());
  for (const TensorRequest& r : requests) {
    const int64_t i = ckpt.IndexOf(r.name);
    if (i < 0) {
      return Status::NotFound("tensor '" + r.name +
                              "' is not in the checkpoint");
    }
    const TensorInfo& t = ckpt.tensors()[static_cast<size_t>(i)];
    WL_ASSIGN_OR_RETURN(
        TensorSelection sel,
        SelectSlice(t, static_cast<uint32_t>(i), DTypeBits(t.dtype), r.slices));
    out.push_back(std::move(sel));
  }
  return out;
}

std::vector<TensorSelection> WholeTensors(const Checkpoint& ckpt,
                                          std::span<const uint32_t> tensors) {
  std::vector<TensorSelection> out;
  out.reserve(tensors.size());
  for (uint32_t i : tensors) {
    const TensorInfo& t = ckpt.tensors()[i];
    TensorSelection sel;
    sel.tensor = i;
    sel.file = t.file;
    sel.shape = t.shape;
    sel.bytes = t.size;
    if (t.size > 0) sel.blocks.push_back({t.offset, t.size, 1, 0});
    out.push_back(std::move(sel));
  }
  return out;
}

std::vector<uint32_t> TensorsOf(std::span<const TensorSelection> selections) {
  std::vector<uint32_t> out;
  out.reserve(selections.size());
  for (const TensorSelection& s : selections) out.push_back(s.tensor);
  return out;
}

std::vector<LoadedTensor> MakeLoadedSelections(
    const Checkpoint& ckpt, std::span<const TensorSelection> selections,
    Device device, std::span<const uintptr_t> dsts,
    const std::shared_ptr<void>& owner) {
  std::vector<LoadedTensor> out;
  out.reserve(selections.size());
  for (size_t k = 0; k < selections.size(); ++k) {
    const TensorSelection& sel = selections[k];
    const TensorInfo& info = ckpt.tensors()[sel.tensor];
    LoadedTensor lt;
    lt.name = info.name;
    lt.dtype = info.dtype;
    lt.shape = sel.shape;
    lt.device = device;
    lt.data = reinterpret_cast<void*>(dsts[k]);
    lt.size = sel.bytes;
    lt.owner = owner;
    out.push_back(std::move(lt));
  }
  return out;
}

std::vector<bool> FilesNeeded(const Checkpoint& ckpt,
                              std::span<const uint32_t> tensors) {
  std::vector<bool> needed(ckpt.files().size(), false);
  for (uint32_t i : tensors) {
    const TensorInfo& t = ckpt.tensors()[i];
    if (t.size > 0) needed[t.file] = true;
  }
  return needed;
}

}  // namespace weightlift::internal
