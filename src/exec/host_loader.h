// The host loader: checkpoints into host memory.
#pragma once

#include <functional>
#include <memory>

#include "io/file.h"
#include "weightlift/loader.h"

namespace weightlift::internal {

// Loader for options.device == cpu. Allocates its bounce buffers once.
StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options);

// Tests only: WRAP sees every File the loader opens (with the index of its
// checkpoint file) and returns the File to use instead, e.g. a
// FaultInjectingFile that fails mid-load.
using FileWrapper =
    std::function<std::unique_ptr<File>(std::unique_ptr<File>, uint32_t)>;
StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options,
                                                   FileWrapper wrap);

}  // namespace weightlift::internal
