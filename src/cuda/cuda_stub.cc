// Built when the CUDA toolkit was not found: every CUDA entry point answers
// Unsupported with the reason.
#include "cuda/cuda_loader.h"
#include "cuda/device_available.h"
#include "cuda/register_ahead.h"

namespace weightlift::internal {

namespace {
constexpr const char* kWhy =
    "built without CUDA (the CUDA toolkit was not found at configure time)";
}

bool CudaCompiledIn() { return false; }

StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options) {
  return Status::Unsupported(options.device.ToString() + " requested but " +
                             kWhy);
}

StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options,
                                                   CudaLoaderHooks) {
  return CreateCudaLoader(options);
}

bool CudaDeviceAvailable(int device, std::string* why) {
  if (why) *why = kWhy;
  return false;
}

StatusOr<RegisteringAhead> RegisterPagesAhead(const Checkpoint&,
                                              std::span<const TensorRequest>,
                                              int device, double, bool) {
  return Status::Unsupported(
      "registering pages with cuda:" + std::to_string(device) +
      " ahead of a load: " + kWhy);
}

}  // namespace weightlift::internal
