// Turning a load request (names, or caller destinations) into the tensors it
// covers, with every argument checked. Shared by the host and CUDA loaders.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plan/selection.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/request.h"

namespace weightlift::internal {

// Indices into ckpt.tensors(), in request order. Empty NAMES means every
// tensor. NotFound for a name the checkpoint lacks, InvalidArgument for a
// name asked twice.
StatusOr<std::vector<uint32_t>> ResolveNames(
    const Checkpoint& ckpt, std::span<const std::string> names);

// Same for destinations; also InvalidArgument when a destination's size
// differs from the tensor's byte size or its pointer is null (with a
// non-zero size), naming the tensor and both sizes.
StatusOr<std::vector<uint32_t>> ResolveDestinations(
    const Checkpoint& ckpt, std::span<const Destination> dests);

// REQUESTS as selections, one per request in order (see plan/selection.h):
// NotFound for a name the checkpoint lacks, and SelectSlice's errors. A
// tensor may be requested more than once (e.g. two slices of it).
StatusOr<std::vector<TensorSelection>> ResolveRequests(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests);

// TENSORS (indices into ckpt.tensors()) as whole-tensor selections.
std::vector<TensorSelection> WholeTensors(const Checkpoint& ckpt,
                                          std::span<const uint32_t> tensors);

// The checkpoint index of each selection.
std::vector<uint32_t> TensorsOf(std::span<const TensorSelection> selections);

// The loaded tensors of a finished Load(): SELECTIONS[k] (a whole tensor or
// a slice, its shape and size from the selection) at address DSTS[k] on
// DEVICE, all kept alive by OWNER.
std::vector<LoadedTensor> MakeLoadedSelections(
    const Checkpoint& ckpt, std::span<const TensorSelection> selections,
    Device device, std::span<const uintptr_t> dsts,
    const std::shared_ptr<void>& owner);

// Which files the tensors touch (size ckpt.files().size()).
std::vector<bool> FilesNeeded(const Checkpoint& ckpt,
                              std::span<const uint32_t> tensors);

}  // namespace weightlift::internal
