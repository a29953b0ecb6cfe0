#include "cuda/scatter_copy.h"

#include <string>

#include "cuda/cuda_util.h"

namespace weightlift::internal {

Status CopyScatterToDevice(const Scatter& sc, const std::byte* chunk,
                           cudaStream_t stream) {
  void* dst = reinterpret_cast<void*>(sc.dst);
  const std::byte* src = chunk + sc.chunk_offset;
  const bool strided = sc.rows > 1;
  // dpitch == width for the 2-D copy: the destination rows are packed.
  const cudaError_t e =
      strided ? cudaMemcpy2DAsync(dst, sc.length, src, sc.src_pitch, sc.length,
                                  sc.rows, cudaMemcpyHostToDevice, stream)
              : cudaMemcpyAsync(dst, src, sc.length, cudaMemcpyHostToDevice,
                                stream);
  if (e == cudaSuccess) return Status::OK();  // no message on the hot path
  // A failed enqueue is not sticky; clear it so later calls start clean.
  (void)cudaGetLastError();
  const std::string what =
      strided ? "cudaMemcpy2DAsync of " + std::to_string(sc.bytes()) +
                    " bytes (" + std::to_string(sc.rows) + " rows of " +
                    std::to_string(sc.length) + ", source pitch " +
                    std::to_string(sc.src_pitch) + ")"
              : "cudaMemcpyAsync of " + std::to_string(sc.length) + " bytes";
  return CudaStatus(e, what + " to the device (tensor #" +
                           std::to_string(sc.tensor) + ", chunk offset " +
                           std::to_string(sc.chunk_offset) + ")");
}

}  // namespace weightlift::internal
