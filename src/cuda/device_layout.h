// Where a Load() puts each tensor on the device: one allocation for the
// whole load, every tensor 256-byte aligned (like cudaMalloc's own
// allocations), checked against the device's free memory first.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct DeviceLayout {
  std::vector<uint64_t> offsets;  // request index -> offset in the allocation
  uint64_t total = 0;             // allocation bytes
  uint64_t tensor_bytes = 0;      // sum of tensor sizes
};

// Lays out tensors of SIZES bytes in request order.
// InvalidArgument when the layout overflows 64 bits.
StatusOr<DeviceLayout> LayOutOnDevice(std::span<const uint64_t> sizes);

// One cudaMalloc of LAYOUT.total bytes on DEVICE. ResourceExhausted naming
// the need and the free memory when it cannot fit (checked with
// cudaMemGetInfo first, and again if cudaMalloc fails). The owner frees the
// memory on DEVICE (restoring the caller's current device) when the last
// copy is gone; null for a 0-byte layout.
StatusOr<std::shared_ptr<void>> AllocateLayout(int device,
                                               const DeviceLayout& layout);

}  // namespace weightlift::internal
