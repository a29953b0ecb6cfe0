#include "cuda/destination_check.h"

#include <cuda.h>  // types only: the driver is reached through the runtime
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "cuda/cuda_util.h"

namespace weightlift::internal {
namespace {

using GetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange, or null when the driver does not offer it.
GetAddressRangeFn AddressRangeFn() {
  static const GetAddressRangeFn fn =
      DriverFn<GetAddressRangeFn>("cuMemGetAddressRange");
  return fn;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Status CheckDeviceDestinations(std::span<const Destination> dests, int device) {
  GetAddressRangeFn range = AddressRangeFn();
  // The last allocation found good: destinations inside it (every tensor of
  // a load_checkpoint's one block) need no driver calls of their own.
  uint64_t known_base = 0, known_end = 0;
  for (const Destination& d : dests) {
    if (d.size == 0) continue;
    const auto at = reinterpret_cast<uint64_t>(d.data);
    if (at >= known_base && at < known_end && d.size <= known_end - at) {
      continue;
    }
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
    if (range == nullptr) continue;
    CUdeviceptr base = 0;
    size_t alloc = 0;
    const auto start = reinterpret_cast<CUdeviceptr>(d.data);
    if (range(&base, &alloc, start) != CUDA_SUCCESS) continue;
    // start lies in [base, base + alloc), so neither subtraction wraps.
    const uint64_t room = base + alloc - start;
    if (d.size > room) {
      return Status::InvalidArgument(
          "destination of tensor '" + d.name + "' at " + Hex(start) +
          " needs " + std::to_string(d.size) + " bytes but its allocation " +
          "(base " + Hex(base) + ", " + std::to_string(alloc) +
          " bytes) ends " + std::to_string(room) +
          " bytes after it: the copy would write past the allocation");
    }
    known_base = base;
    known_end = base + alloc;
  }
  return Status::OK();
}

}  // namespace weightlift::internal
