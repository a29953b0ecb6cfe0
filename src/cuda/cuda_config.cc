#include "cuda/cuda_config.h"

#include <algorithm>
#include <limits>

#include "env/io_util.h"
#include "util/thread_count.h"
#include "weightlift/byte_size.h"

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
constexpr size_t kDefaultPieceBytes = 256u << 20;

}  // namespace

StatusOr<CudaLoaderConfig> ResolveCudaConfig(const LoadOptions& options,
                                             unsigned hardware_threads) {
  // The one check of the knobs (ranges, so no page round-up below can wrap
  // even when CreateCudaLoader is called directly).
  WL_RETURN_IF_ERROR(options.Validate());
  CudaLoaderConfig c;
  c.threads = ThreadCount(options.threads, ThreadUse::kCudaStaging,
                          hardware_threads, options.local_world_size);
  if (std::string note =
          SharedCoresNote(options.threads, c.threads, hardware_threads,
                          options.local_world_size);
      !note.empty()) {
    c.notes.push_back(std::move(note));
  }
  size_t chunk =
      options.cuda_chunk_bytes ? options.cuda_chunk_bytes : kDefaultChunkBytes;
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
  // Processes loading at once on this host (local_world_size) share its
  // staging budget as they share its cores: each pins its share, at least
  // 2 slots per thread, so N co-located ranks pin about what one process
  // would and their rings together stay as cache-friendly as one ring
  // (see kDefaultChunkBytes).
  if (options.local_world_size > 1) {
    const uint64_t share = std::max<uint64_t>(
        slots / static_cast<uint64_t>(options.local_world_size),
        2ull * static_cast<uint64_t>(c.threads));
    if (share < slots) {
      c.notes.push_back("staging: a ring of " +
                        FormatByteSize(share * c.slot_bytes) +
                        ", this process's share of staging_bytes " +
                        FormatByteSize(options.staging_bytes) + " shared by " +
                        std::to_string(options.local_world_size) +
                        " processes loading on this host (local_world_size)");
      slots = share;
    }
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
  if (options.copy_streams > 0) {
    c.streams = std::min(options.copy_streams, c.threads);
  } else if (options.local_world_size > 1) {
    // Processes loading at once may share one GPU (tensor-parallel ranks
    // simulated on one card, or a host with fewer GPUs than ranks). In
    // three interleaved rounds on one H100, n ranks together reached
    // 0.94-0.95x (n = 2, 4) and 0.91-0.92x (n = 8) of the pinned-copy
    // ceiling with one copy stream each, against 0.85-0.95x and 0.90-0.92x
    // with a stream per worker (bench/results/2026-12-06-h200-session27).
    // A process alone on its GPU loses nothing by it: one stream or four
    // changed a rank's rate by under 2% (session 21, call D), and a rank
    // of 8 alone with LOCAL_WORLD_SIZE=8 ran the same on one stream or two
    // (session 27, call D).
    c.streams = 1;
    c.notes.push_back("copy streams: 1, as " +
                      std::to_string(options.local_world_size) +
                      " processes load on this host at once (local_world_size; "
                      "copy_streams= sets it)");
  } else {
    c.streams = c.threads;
  }
  return c;
}

}  // namespace weightlift::internal
