// LoadInto's check of the caller's destinations: each must be device memory
// of the loader's device.
#pragma once

#include <span>

#include "weightlift/loader.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// InvalidArgument naming the tensor, the device and what the pointer is
// (cudaPointerGetAttributes' type and device, or its error name) for the
// first non-empty destination that is not device or managed memory of
// cuda:DEVICE, or whose [data, data + size) runs past the end of the
// allocation holding data (cuMemGetAddressRange, reached through the runtime's
// driver entry points). A pointer into a larger pool (PyTorch's caching
// allocator) is checked against the pool's block, not the tensor the caller
// meant: that is as much as the driver knows.
Status CheckDeviceDestinations(std::span<const Destination> dests, int device);

}  // namespace weightlift::internal
