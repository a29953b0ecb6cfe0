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
// cuda:DEVICE. Only the start pointer is checked: CUDA's runtime API cannot
// say whether [data, data + size) stays inside one allocation.
Status CheckDeviceDestinations(std::span<const Destination> dests, int device);

}  // namespace weightlift::internal
