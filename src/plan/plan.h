// The planner: pure computation, no I/O.
//
// Turns "these byte ranges of these files go to these destinations" into a
// list of read chunks the executor can run in any order from any thread.
// Each chunk is either read straight into its destination (direct) or into a
// bounce/staging slot and then scattered to one or more destinations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace weightlift::internal {

// A contiguous byte range of one file that must land at DST, or with
// ROWS > 1 a strided one: ROWS runs of LENGTH bytes, PITCH bytes apart in
// the file, landing back to back at DST. A strided segment is moved either
// by covering reads placed with a strided copy (GATHER false) or, with
// GATHER, by reading each run on its own, packed back to back (a slice's
// row runs, see selection.h). DST is an address in the destination's space
// (host or device); the planner only does arithmetic on it.
struct Segment {
  uint32_t file = 0;
  uint64_t file_offset = 0;
  uint64_t length = 0;
  uintptr_t dst = 0;
  uint32_t tensor = 0;  // completion is tracked per tensor
  uint64_t rows = 1;
  uint64_t pitch = 0;  // > length when rows > 1
  bool gather = false;
  uint64_t bytes() const { return length * rows; }
};

// Part of a chunk that goes to one destination: LENGTH bytes at
// chunk_offset, or with ROWS > 1 a strided copy of ROWS runs of LENGTH
// bytes, SRC_PITCH apart in the chunk, landing back to back at DST (one
// cudaMemcpy2DAsync on CUDA).
struct Scatter {
  uint64_t chunk_offset = 0;  // from the start of the chunk's read
  uintptr_t dst = 0;
  uint64_t length = 0;
  uint32_t tensor = 0;
  uint64_t rows = 1;
  uint64_t src_pitch = 0;
  uint64_t bytes() const { return length * rows; }
};

struct ReadChunk {
  uint32_t file = 0;
  uint64_t offset = 0;  // file offset of the read (aligned for O_DIRECT)
  uint64_t length = 0;  // bytes to read (aligned, or ending at file end)
  // A gather read (ROWS > 1): ROWS runs of length / rows bytes, the first
  // at OFFSET and each PITCH bytes after the last, read one by one and
  // packed back to back (only on files with alignment 1). ReadChunkBytes
  // (exec/read_chunk.h) is the one place that performs a chunk's reads.
  uint64_t rows = 1;
  uint64_t pitch = 0;
  // Direct chunks: read straight to direct_dst; `scatters` lists the tensor
  // pieces the read delivers, back to back from chunk_offset 0 (for
  // completion only: nothing is copied). Bounce chunks: direct_dst == 0;
  // read into a slot, then scatter.
  uintptr_t direct_dst = 0;
  std::vector<Scatter> scatters;
  // The bytes are already in memory the sink copies from (pages registered
  // ahead, cuda/registered_pages.h): nothing is read, and the chunk is as
  // large as its plan allowed, not a slot (MergeInPlace).
  bool in_place = false;
  bool is_direct() const { return direct_dst != 0; }
};

// What the planner needs to know about each file.
struct PlanFile {
  uint64_t size = 0;
  uint64_t alignment = 1;    // the backend's required alignment (1 or 4096)
  bool allow_direct = true;  // may reads of this file land in destinations?
};

struct PlanOptions {
  uint64_t chunk_bytes = 8u << 20;       // largest read
  uint64_t direct_min_bytes = 1u << 20;  // smaller segments use bounce
};

struct Plan {
  std::vector<ReadChunk> chunks;
  // Number of scatters (over all chunks) that deliver bytes to each tensor;
  // a tensor is complete when that many have finished.
  std::vector<uint32_t> pieces_per_tensor;
  uint64_t bytes_read = 0;        // sum of chunk lengths
  uint64_t bytes_delivered = 0;   // sum of segment bytes
  uint64_t max_bounce_bytes = 0;  // largest bounce chunk, aligned up
};

// FILES[i] describes file i. NUM_TENSORS sizes pieces_per_tensor.
// Segments must not overlap in the destination; they may share file bytes.
// Segments adjacent both in the file and in the destination are one run
// (a file's tensors laid out as in the file). A direct chunk is made only
// where a run's destination address and file offset agree modulo the file's
// alignment; edges go through bounce chunks, which coalesce neighbouring
// ranges of one file up to chunk_bytes. Strided segments (rows > 1) are
// never direct: their chunks each cover whole rows, at most chunk_bytes,
// REQUIRES a row plus one alignment block to fit chunk_bytes. Gather
// segments become gather chunks of whole rows, at most chunk_bytes each,
// direct where the file allows it (the runs are separate reads either way,
// so a bounce copy would buy nothing); on a file with alignment > 1, or
// with runs wider than chunk_bytes, their rows are planned as plain
// segments instead.
Plan MakePlan(std::span<const Segment> segments,
              std::span<const PlanFile> files, size_t num_tensors,
              const PlanOptions& options);

// Merges IN_PLACE, the plan of a route's selections that are copied
// straight out of memory already in place, into PLAN (its other
// selections', read into slots): chunks in (file, offset) order, so that
// workers taking them in turn keep reads and copies going side by side;
// IN_PLACE's chunks flagged in_place. Its bytes read are the bytes it
// delivers (nothing is read; a covering chunk's unselected rows do not
// move); max_bounce_bytes stays PLAN's. Both plans count the same tensors.
void MergeInPlace(Plan in_place, Plan* plan);

// S's rows as plain segments (S itself when it has one row), for a path
// that moves ranges, not strides (GDS).
void AppendRows(const Segment& s, std::vector<Segment>* out);

// The chunk size for a load of TOTAL bytes on WORKERS workers: MAX_CHUNK,
// or less for a small load so that every worker gets about two chunks
// (a 22 MB slice in 8 MiB chunks would keep 3 of 16 workers busy), never
// below FLOOR (per-read costs) and rounded down to ALIGNMENT.
uint64_t ChunkBytesFor(uint64_t total, int workers, uint64_t max_chunk,
                       uint64_t floor, uint64_t alignment);
// The usual FLOOR: below it a read's fixed cost (a syscall, a copy launch)
// starts to show against its bytes.
inline constexpr uint64_t kMinChunkBytes = 256u << 10;

// How a load of TOTAL bytes is spread over at most WORKERS workers: a
// small load (one slice) wakes only as many workers as it keeps busy, at
// least MIN_WORKER_BYTES each, and gives each about two chunks
// (ChunkBytesFor with the other arguments). On the H200 a 22.5 MB slice
// from the page cache moved fastest on 8 of the 16 workers (row 1.18-1.30
// ms against 1.47-1.52 on 16, column 1.63-1.73 against 2.03-2.04;
// bench/results/2026-12-03-h200-session6/callB/slice6_slice_phases.log):
// more readers of the page cache at once only contend, and each woken
// worker costs its start and its drain.
struct Spread {
  int workers = 1;
  uint64_t chunk_bytes = 0;
};
Spread SpreadFor(uint64_t total, int workers, uint64_t max_chunk,
                 uint64_t floor, uint64_t alignment, uint64_t min_worker_bytes);
// The usual MIN_WORKER_BYTES: a 22.5 MB slice gets 8 workers; any load
// from 40 MB on gets 16.
inline constexpr uint64_t kMinWorkerBytes = 5u << 19;  // 2.5 MiB

}  // namespace weightlift::internal
