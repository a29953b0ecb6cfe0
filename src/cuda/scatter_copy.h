// The one place a sink turns a chunk's scatter into a host-to-device copy:
// both CUDA sinks (staging_sink.cc: out of a pinned slot;
// host_register_sink.cc: out of a registered mapping of the page cache) deliver
// through it. Only compiled when WL_HAVE_CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "plan/plan.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// Enqueues on STREAM the copy of scatter SC out of CHUNK (the host memory
// holding the chunk's bytes; pinned or registered, so the copy is truly
// asynchronous) to device address sc.dst: one cudaMemcpyAsync of sc.length
// bytes for a contiguous piece (rows <= 1), one cudaMemcpy2DAsync of
// sc.rows rows of sc.length bytes, sc.src_pitch apart in CHUNK and packed
// in the destination, for a strided piece (a slice's rows): never one copy
// per row. Returns once the copy is enqueued; the caller records an event
// to learn when CHUNK may be reused. On an enqueue error: CudaError naming
// the call, the bytes (and rows and pitch), the tensor index and the CUDA
// error; nothing was enqueued for SC.
Status CopyScatterToDevice(const Scatter& sc, const std::byte* chunk,
                           cudaStream_t stream);

}  // namespace weightlift::internal
