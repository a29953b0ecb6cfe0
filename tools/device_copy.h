// Copying device memory back to the host, for `verify --hash` on CUDA loads.
#pragma once

#include <cstddef>

#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::cli {

// Copies SIZE bytes from device memory SRC on DEVICE to host memory DST
// (synchronously). Unsupported in a build without CUDA.
Status CopyDeviceToHost(const Device& device, void* dst, const void* src,
                        size_t size);

}  // namespace weightlift::cli
