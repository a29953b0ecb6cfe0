#include "device_copy.h"

#include <string>

#if WL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace weightlift::cli {

#if WL_HAVE_CUDA

Status CopyDeviceToHost(const Device& device, void* dst, const void* src,
                        size_t size) {
  if (size == 0) return Status::OK();
  cudaError_t err = cudaSetDevice(device.index);
  if (err == cudaSuccess) {
    err = cudaMemcpy(dst, src, size, cudaMemcpyDeviceToHost);
  }
  if (err != cudaSuccess) {
    return Status::CudaError("copying " + std::to_string(size) +
                             " bytes from " + device.ToString() +
                             " to the host: " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
  }
  return Status::OK();
}

#else

Status CopyDeviceToHost(const Device& device, void*, const void*, size_t) {
  return Status::Unsupported(
      "this build has no CUDA support; cannot read "
      "back memory of " +
      device.ToString());
}

#endif

}  // namespace weightlift::cli
