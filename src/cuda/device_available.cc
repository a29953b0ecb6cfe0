#include "cuda/device_available.h"

#include "cuda/cuda_util.h"

namespace weightlift::internal {

bool CudaDeviceAvailable(int device, std::string* why) {
  Status s = CheckCudaDevice(device);
  if (s.ok()) s = UseDevice(device);
  if (!s.ok()) {
    if (why) *why = s.ToString();
    return false;
  }
  return true;
}

}  // namespace weightlift::internal
