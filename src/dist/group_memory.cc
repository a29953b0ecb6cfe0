#include "dist/group_memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

#ifdef WL_HAVE_NCCL_COMMUNICATOR
#include <cuda_runtime.h>

#include "cuda/cuda_util.h"
#endif

namespace weightlift::internal {

#ifdef WL_HAVE_NCCL_COMMUNICATOR
struct OnDevice::Guard {
  explicit Guard(int device) : on(device) {}
  ScopedDevice on;
};
#else
struct OnDevice::Guard {};
#endif

OnDevice::OnDevice(const Device& device) {
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  if (device.is_cuda()) guard_ = std::make_unique<Guard>(device.index);
#else
  (void)device;
#endif
}

OnDevice::~OnDevice() = default;

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
  void* p = nullptr;
  cudaError_t e = cudaSuccess;
  {
    ScopedDevice on(device.index);  // only this rank's device
    e = on.error();
    if (e == cudaSuccess) e = cudaMalloc(&p, size);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::CudaError("group load: cudaMalloc of " +
                             std::to_string(bytes) + " bytes on " +
                             device.ToString() + ": " + cudaGetErrorName(e));
  }
  const int index = device.index;
  return std::shared_ptr<void>(p, [index](void* q) {
    ScopedDevice on(index);  // whichever thread drops the last owner
    cudaFree(q);
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
  cudaError_t e = cudaSuccess;
  {
    ScopedDevice on(device.index);  // only this rank's device
    e = on.error();
    if (e == cudaSuccess) {
      e = cudaMemcpy(
          dst, src, bytes,
          to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    }
    // From pageable memory cudaMemcpy may return before its DMA to the
    // device has landed; the collective that reads these bytes next runs
    // on another (non-blocking) stream, which does not wait for the
    // legacy default stream. (A copy to pageable memory is done when it
    // returns.)
    if (e == cudaSuccess && to_device) {
      e = cudaStreamSynchronize(cudaStreamLegacy);
    }
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
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
