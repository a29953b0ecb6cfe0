// The CUDA loader: checkpoints straight into device memory, through GDS
// where the machine really has it and through a pinned staging pipeline
// (or zero-copy from the page cache) where it does not.
#pragma once

#include <memory>

#include "weightlift/loader.h"

namespace weightlift::internal {

// Loader for options.device (a CUDA device). Without CUDA compiled in, or on
// a machine with no driver or no such device, returns an error naming why.
StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options);

// True when this build has CUDA support compiled in.
bool CudaCompiledIn();

}  // namespace weightlift::internal
