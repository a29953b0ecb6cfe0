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
// Copies between host memory and memory from AllocateOn. Both are done
// when they return: CopyIn's bytes are on the device for work on any
// stream (a collective on the communicator's own stream reads them next).
Status CopyIn(const Device& device, void* dst, const void* host,
              uint64_t bytes);
Status CopyOut(const Device& device, void* host, const void* src,
               uint64_t bytes);

// While it lives, this thread works on DEVICE: a CUDA device's context is
// current, and the thread gets back the context it had, or none (a thread
// without one is not left with a context on GPU 0; cuda/cuda_util.h,
// ScopedDevice). Nothing for the host.
class OnDevice {
 public:
  explicit OnDevice(const Device& device);
  ~OnDevice();
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  struct Guard;
  std::unique_ptr<Guard> guard_;
};

}  // namespace weightlift::internal
