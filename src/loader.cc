// Loader::Create picks the host or the CUDA loader for options.device.
#include "weightlift/loader.h"

#include "cuda/cuda_loader.h"
#include "exec/host_loader.h"

namespace weightlift {

StatusOr<std::unique_ptr<Loader>> Loader::Create(const LoadOptions& options) {
  WL_RETURN_IF_ERROR(options.Validate());
  if (options.device.is_cuda()) return internal::CreateCudaLoader(options);
  return internal::CreateHostLoader(options);
}

}  // namespace weightlift
