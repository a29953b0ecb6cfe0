#include "cuda/device_layout.h"

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_util.h"
#include "env/io_util.h"

namespace weightlift::internal {
namespace {
constexpr uint64_t kDeviceAlign = 256;
}  // namespace

StatusOr<DeviceLayout> LayOutOnDevice(std::span<const uint64_t> sizes) {
  DeviceLayout l;
  l.offsets.resize(sizes.size());
  for (size_t r = 0; r < sizes.size(); ++r) {
    uint64_t size = sizes[r];
    uint64_t off = AlignUp(l.total, kDeviceAlign);
    if (off < l.total || off + size < off) {
      return Status::InvalidArgument("device layout overflows 64 bits");
    }
    l.offsets[r] = off;
    l.total = off + size;
    l.tensor_bytes += size;
  }
  // Every tensor gets a valid, non-null device pointer, also when all of
  // them are empty (frameworks reject null data pointers).
  if (!sizes.empty() && l.total == 0) l.total = kDeviceAlign;
  return l;
}

StatusOr<std::shared_ptr<void>> AllocateLayout(int device,
                                               const DeviceLayout& layout) {
  size_t free_b = 0, total_b = 0;
  WL_RETURN_IF_ERROR(
      CudaStatus(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo"));
  if (layout.total > free_b) {
    return Status::ResourceExhausted(
        "cuda:" + std::to_string(device) + ": loading " +
        std::to_string(layout.offsets.size()) + " tensors needs " +
        FormatBytes(layout.total) +
        " of device memory (tensor bytes + 256-byte alignment) but only " +
        FormatBytes(free_b) + " of " + FormatBytes(total_b) + " is free");
  }
  WL_ASSIGN_OR_RETURN(DeviceBuffer buf,
                      DeviceBuffer::Allocate(device, layout.total));
  return std::shared_ptr<void>(buf.release(), [device](void* p) {
    if (!p) return;
    ScopedDevice on(device);  // whichever thread drops the last owner
    cudaFree(p);
  });
}

}  // namespace weightlift::internal
