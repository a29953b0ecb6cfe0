#include "cuda/destination_check.h"

#include <cuda_runtime_api.h>

#include <string>

namespace weightlift::internal {

Status CheckDeviceDestinations(std::span<const Destination> dests, int device) {
  for (const Destination& d : dests) {
    if (d.size == 0) continue;
    cudaPointerAttributes a{};
    cudaError_t e = cudaPointerGetAttributes(&a, d.data);
    if (e != cudaSuccess) (void)cudaGetLastError();
    bool on_device =
        e == cudaSuccess &&
        (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) &&
        a.device == device;
    if (!on_device) {
      return Status::InvalidArgument(
          "destination of tensor '" + d.name +
          "' is not device memory of "
          "cuda:" +
          std::to_string(device) +
          (e == cudaSuccess ? " (pointer type " + std::to_string(a.type) +
                                  ", device " + std::to_string(a.device) + ")"
                            : std::string(" (") + cudaGetErrorName(e) + ")"));
    }
  }
  return Status::OK();
}

}  // namespace weightlift::internal
