#include "dist/group_memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

#ifdef WL_HAVE_NCCL_COMMUNICATOR
#include <cuda_runtime.h>
#endif

namespace weightlift::internal {

StatusOr<std::shared_ptr<void>> AllocateOn(const Device& device,
                                           uint64_t bytes) {
  const uint64_t size = bytes ? bytes : 1;
  if (!device.is_cuda()) {
    void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
    if (!p) {
      return Status::ResourceExhausted("group load: cannot allocate " +
                                       std::to_string(bytes) +
                                       " bytes of host memory");
    }
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  int previous = 0;
  cudaGetDevice(&previous);
  cudaError_t e = cudaSetDevice(device.index);
  void* p = nullptr;
  if (e == cudaSuccess) e = cudaMalloc(&p, size);
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    return Status::CudaError("group load: cudaMalloc of " +
                             std::to_string(bytes) + " bytes on " +
                             device.ToString() + ": " + cudaGetErrorName(e));
  }
  const int index = device.index;
  return std::shared_ptr<void>(p, [index](void* q) {
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(index);
    cudaFree(q);
    cudaSetDevice(prev);
  });
#else
  return Status::Unsupported("group load on " + device.ToString() +
                             ": this build has no CUDA");
#endif
}

namespace {

Status Copy(const Device& device, void* dst, const void* src, uint64_t bytes,
            bool to_device) {
  if (!device.is_cuda()) {
    if (bytes) std::memcpy(dst, src, bytes);
    return Status::OK();
  }
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  int previous = 0;
  cudaGetDevice(&previous);
  cudaError_t e = cudaSetDevice(device.index);  // only this rank's device
  if (e == cudaSuccess) {
    e = cudaMemcpy(dst, src, bytes,
                   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  }
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    return Status::CudaError("group load: cudaMemcpy of " +
                             std::to_string(bytes) + " bytes on " +
                             device.ToString() + ": " + cudaGetErrorName(e));
  }
  return Status::OK();
#else
  (void)to_device;
  return Status::Unsupported("this build has no CUDA");
#endif
}

}  // namespace

Status CopyIn(const Device& device, void* dst, const void* host,
              uint64_t bytes) {
  return Copy(device, dst, host, bytes, true);
}

Status CopyOut(const Device& device, void* host, const void* src,
               uint64_t bytes) {
  return Copy(device, host, src, bytes, false);
}

}  // namespace weightlift::internal
