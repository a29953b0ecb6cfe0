// The host loader: checkpoints into host memory.
#pragma once

#include <memory>

#include "env/file.h"
#include "exec/open_files.h"
#include "weightlift/loader.h"

namespace weightlift::internal {

// Loader for options.device == cpu. Allocates its bounce buffers once.
StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options);

// Tests only: WRAP sees every File the loader opens (see FileWrapper).
StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options,
                                                   FileWrapper wrap);

}  // namespace weightlift::internal
