// Host-side baselines and ceilings for `weightlift bench` and `demo`: what a
// naive loader gets on the same files, what the storage and the page cache
// can deliver, and the page-cache controls that make a run cold or warm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/status.h"

namespace weightlift::bench {

// One timed pass over a checkpoint's bytes.
struct Timing {
  uint64_t bytes = 0;  // bytes moved (tensor bytes, or whole files for the
                       // ceilings)
  double seconds = 0;
  std::string method;  // what exactly ran, e.g. "O_DIRECT io_uring QD16"
  double gb_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  }
};

// New anonymous private memory (not touched yet), given back with munmap.
// Move-only. The bench's own buffers: the fresh-memory ceiling, the reads
// into new memory, the touched destinations of LoadInto().
class AnonymousMemory {
 public:
  // At least one byte. ResourceExhausted naming WHAT, the size and errno
  // when mmap fails.
  static StatusOr<AnonymousMemory> Map(uint64_t bytes, const std::string& what);
  AnonymousMemory() = default;
  AnonymousMemory(AnonymousMemory&& o) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& o) noexcept;
  ~AnonymousMemory();
  std::byte* data() const { return data_; }
  uint64_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// Every distinct file of CKPT (the resolved paths, in file order).
std::vector<std::string> CheckpointFiles(const Checkpoint& ckpt);

// Evicts every file of CKPT from the page cache (posix_fadvise DONTNEED)
// and returns the sampled resident fraction afterwards, 0..1 (bytes-weighted
// over the files). A fraction well above 0 means the eviction did not take
// (tmpfs, pages mapped elsewhere): a "cold" run is then not cold.
StatusOr<double> EvictCheckpoint(const Checkpoint& ckpt);

// Sampled resident fraction of CKPT's files, bytes-weighted, 0..1.
StatusOr<double> ResidentFraction(const Checkpoint& ckpt);

// Reads every file once through the page cache so its pages are resident.
Status WarmCheckpoint(const Checkpoint& ckpt);

// Naive host loader, as plain safetensors does it: mmap each file, then
// for each tensor allocate host memory and copy it out of the mapping (page
// faults served one at a time inside the copy). All tensors stay allocated
// until the pass ends, as a loaded model would.
StatusOr<Timing> NaiveMmapCopy(const Checkpoint& ckpt);

// Naive host loader: one thread, for each tensor allocate host memory and
// pread its bytes (buffered, no O_DIRECT).
StatusOr<Timing> NaivePreadOneThread(const Checkpoint& ckpt);

// Cold storage ceiling: every byte of every file with O_DIRECT through
// io_uring at a deep queue (bench/raw_read.h); the best of a few queue
// shapes, each after evicting the files' pages.
StatusOr<Timing> StorageCeiling(const Checkpoint& ckpt);

// Fresh-memory ceiling: first touch of BYTES of new anonymous memory
// (mmap + MADV_POPULATE_WRITE, or a write per page where the kernel lacks
// it), the hop every loader returning new host memory pays.
StatusOr<Timing> FreshMemoryCeiling(uint64_t bytes);

// Warm reference for a load into memory that already exists: one thread
// reads every file from start to end (buffered pread, 8 MiB pieces) into
// DST, which holds at least the files' total size and was touched before.
// What `read()` of the files into an existing buffer costs: one page-cache
// copy with the destination in DRAM (unlike PageCacheCeiling's reused
// buffer, which stays in the CPU cache).
StatusOr<Timing> SequentialReadInto(const Checkpoint& ckpt, std::byte* dst,
                                    uint64_t dst_bytes);

// Warm reference for a load that returns new memory (what Load() does):
// one thread reads each file from start to end (buffered pread, 8 MiB
// pieces) into a new anonymous buffer of the file's size, as `f.read()` or
// `cat` into memory would, and keeps every buffer until the pass ends. The
// timer covers the allocation, the first touch of the new pages and the
// copy out of the page cache; the buffers are given back after it stops.
StatusOr<Timing> SequentialReadFresh(const Checkpoint& ckpt);

// Warm ceiling: buffered read() of every byte out of the page cache with
// THREADS threads (one copy, no destination memory).
StatusOr<Timing> PageCacheCeiling(const Checkpoint& ckpt, int threads);

}  // namespace weightlift::bench
