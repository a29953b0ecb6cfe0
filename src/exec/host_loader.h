// The host loader: checkpoints into host memory.
#pragma once

#include <memory>

#include "weightlift/loader.h"

namespace weightlift::internal {

// Loader for options.device == cpu. Allocates its bounce buffers once.
StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options);

}  // namespace weightlift::internal
