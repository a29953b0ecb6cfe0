// Whether a CUDA device can be used, as a yes/no with the reason: for the
// CLI, the benchmarks and the GPU tests, which skip or fall back to the host
// when it says no. Compiled with and without the CUDA toolkit (cuda_util.cc,
// cuda_stub.cc).
#pragma once

#include <string>

namespace weightlift::internal {

// True when cuda:DEVICE can be used; otherwise false and *WHY (if non-null)
// says why (no CUDA in this build, no driver, no such device).
bool CudaDeviceAvailable(int device, std::string* why);

}  // namespace weightlift::internal
