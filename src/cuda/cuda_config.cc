#include "cuda/cuda_config.h"

#include <algorithm>
#include <limits>

#include "env/io_util.h"

namespace weightlift::internal {
namespace {

// ---- Defaults tuned on the H200 (bench/gpu_sweep.cc; see the report). ----
// Staging slot = one read. With the default staging_bytes (128 MiB) and 16
// threads this is 2 slots per thread, the H200 sweep's best (51 GB/s, 93% of
// the 55 GB/s pinned ceiling). Rings of 256 MiB and more were clearly slower
// (8 MiB x 16 x 2: 38 GB/s; 32 MiB chunks: 23-35 GB/s): a ring that fits the
// host's last-level cache lets the DMA read what pread just wrote from cache
// instead of DRAM.
constexpr size_t kDefaultChunkBytes = 4u << 20;
constexpr int kMaxDefaultThreads = 16;
constexpr size_t kDefaultPieceBytes = 256u << 20;
constexpr size_t kMinChunkBytes = 64u << 10;
// Largest size that AlignUp(size, kPageBytes) does not wrap around.
constexpr uint64_t kMaxPageRoundable =
    std::numeric_limits<uint64_t>::max() - (kPageBytes - 1);

}  // namespace

StatusOr<CudaLoaderConfig> ResolveCudaConfig(const LoadOptions& options,
                                             unsigned hardware_threads) {
  CudaLoaderConfig c;
  unsigned hw = hardware_threads == 0 ? 8 : hardware_threads;
  c.threads =
      options.threads > 0
          ? options.threads
          : static_cast<int>(std::min<unsigned>(hw, kMaxDefaultThreads));
  size_t chunk =
      options.cuda_chunk_bytes ? options.cuda_chunk_bytes : kDefaultChunkBytes;
  if (chunk < kMinChunkBytes) {
    return Status::InvalidArgument("cuda_chunk_bytes " + std::to_string(chunk) +
                                   " is below the minimum of 65536 bytes");
  }
  // Unvalidated options (CreateCudaLoader called directly) must not wrap the
  // page round-up to 0: that divides by zero below, or plans 4 KiB pieces.
  if (chunk > kMaxPageRoundable) {
    return Status::InvalidArgument("cuda_chunk_bytes " + std::to_string(chunk) +
                                   " is too large");
  }
  if (options.host_register_piece_bytes > kMaxPageRoundable) {
    return Status::InvalidArgument(
        "host_register_piece_bytes " +
        std::to_string(options.host_register_piece_bytes) + " is too large");
  }
  c.slot_bytes = AlignUp(chunk, kPageBytes);
  c.piece_bytes = options.host_register_piece_bytes
                      ? AlignUp(options.host_register_piece_bytes, kPageBytes)
                      : kDefaultPieceBytes;
  uint64_t slots = options.staging_bytes / c.slot_bytes;
  if (slots < 2) {
    return Status::InvalidArgument(
        "staging_bytes " + std::to_string(options.staging_bytes) +
        " holds fewer than 2 staging slots of " + std::to_string(c.slot_bytes) +
        " bytes (cuda_chunk_bytes); raise staging_bytes or lower the chunk");
  }
  if (slots < 2ull * c.threads) {
    int t = static_cast<int>(slots / 2);
    c.notes.push_back("staging_bytes holds only " + std::to_string(slots) +
                      " slots of " + std::to_string(c.slot_bytes) +
                      " bytes: using " + std::to_string(t) +
                      " threads instead of " + std::to_string(c.threads) +
                      " (each needs 2 slots to overlap reads and copies)");
    c.threads = t;
  }
  c.slots_per_thread = static_cast<int>(slots / c.threads);
  c.streams = options.copy_streams > 0
                  ? std::min(options.copy_streams, c.threads)
                  : c.threads;
  return c;
}

}  // namespace weightlift::internal
