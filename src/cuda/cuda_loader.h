// The CUDA loader: checkpoints straight into device memory, through GDS
// where the machine really has it and through a pinned staging pipeline
// (or zero-copy from the page cache) where it does not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "exec/open_files.h"
#include "weightlift/loader.h"

namespace weightlift::internal {

// Loader for options.device (a CUDA device). Without CUDA compiled in, or on
// a machine with no driver or no such device, returns an error naming why.
StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options);

// Benchmarks and tests only: a look inside Load().
struct CudaLoaderHooks {
  // Called by Load() right after its one device allocation (BASE, BYTES;
  // null/0 for an empty load), before any byte is copied, with the loader's
  // device current. Its time counts in report.seconds but not in
  // report.alloc_seconds. bench/gpu_sweep.cc uses it to touch fresh memory.
  std::function<void(void* base, uint64_t bytes)> after_alloc;
  // Sees every File the loader opens and returns the File to use instead
  // (fault injection in tests; see FileWrapper).
  FileWrapper wrap_file;
  // Called before each wave of the pinned staging ring is registered
  // (staging_sink.h) with the wave's index; a non-OK status stands for the
  // registration's refusal (tests of the pageable fallback).
  std::function<Status(int wave)> before_pin;
};
StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options,
                                                   CudaLoaderHooks hooks);

// True when this build has CUDA support compiled in.
bool CudaCompiledIn();

}  // namespace weightlift::internal
