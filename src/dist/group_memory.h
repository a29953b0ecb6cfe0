// Memory a group load allocates for its tensors and agreement records, on
// the loader's device (host, or CUDA through the runtime when built in).
#pragma once

#include <cstdint>
#include <memory>

#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// BYTES on DEVICE (host: 256-byte aligned), freed with the last owner.
// Unsupported for CUDA in a build without it; ResourceExhausted / CudaError
// naming the size otherwise.
StatusOr<std::shared_ptr<void>> AllocateOn(const Device& device,
                                           uint64_t bytes);
// Copies between host memory and memory from AllocateOn (synchronously).
Status CopyIn(const Device& device, void* dst, const void* host,
              uint64_t bytes);
Status CopyOut(const Device& device, void* host, const void* src,
               uint64_t bytes);

}  // namespace weightlift::internal
