// Slices as bytes: which bytes of a tensor's file range a request selects,
// and how to move them (pure, no I/O).
//
// SelectSlice turns a tensor and its per-dimension slices into row blocks:
// runs of `width` bytes, `pitch` bytes apart in the file, that land one
// after another in a C-contiguous destination. PlaceSelection then picks,
// for each block, how the executor moves it:
//
//   contiguous  one byte range (a whole tensor, a row range, any slice whose
//               selected bytes are adjacent in the file);
//   row runs    one range per row: only the selected bytes are read;
//   strided     one covering range per staging chunk, read whole, then placed
//               with a strided copy (cudaMemcpy2DAsync on CUDA, a row loop
//               on the host): more bytes, far fewer reads.
//
// Row runs or strided is decided by what each costs: the bytes it moves at
// the storage's granularity (4096 for O_DIRECT, 1 for buffered reads) plus,
// per read, the storage's read cost in bytes (File::read_cost_bytes: 0 for
// the page cache, 32 KiB for O_DIRECT, 1 MiB for object storage),
// whichever is less; on a tie strided (one copy per chunk instead of one
// per row). Buffered reads therefore always take row runs, read straight
// into place on the host (or copied out of a mapping) and gathered into one
// staging slot (one copy per slot) on CUDA; under O_DIRECT and from object
// storage rows that are short or close together are read covering, a chunk
// at a time, and placed with strided copies: more bytes, far fewer reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "weightlift/checkpoint.h"
#include "weightlift/report.h"
#include "weightlift/request.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// ROWS runs of WIDTH bytes; run r starts at file_offset + r * pitch.
struct RowBlock {
  uint64_t file_offset = 0;
  uint64_t width = 0;
  uint64_t rows = 1;
  uint64_t pitch = 0;  // 0 when rows == 1
  uint64_t span() const { return rows == 0 ? 0 : (rows - 1) * pitch + width; }
};

// What one request selects from one tensor.
struct TensorSelection {
  uint32_t tensor = 0;          // index into Checkpoint::tensors()
  uint32_t file = 0;            // the tensor's file
  std::vector<uint64_t> shape;  // the result's shape
  uint64_t bytes = 0;           // the result's bytes (sum over blocks)
  bool whole = true;            // the entire tensor, no slicing
  // In file order, landing back to back in the destination.
  std::vector<RowBlock> blocks;
  // The file offset of the first selected byte (0 when nothing is).
  uint64_t first_offset() const {
    return blocks.empty() ? 0 : blocks.front().file_offset;
  }
};

// A digest of SELS (their tensors, files and blocks, in order): what a
// load selects, to tell whether what prepare made ready is for it.
uint64_t SelectionsDigest(std::span<const TensorSelection> sels);

// TENSOR (index INDEX in the checkpoint, DTYPE_BITS bits per element)
// selected by SLICES (empty: whole). InvalidArgument naming the tensor,
// the dimension and the values for more slices than dimensions, start >
// stop, stop > dim or step 0; Unsupported for a real slice of a sub-byte
// dtype.
StatusOr<TensorSelection> SelectSlice(const TensorInfo& tensor, uint32_t index,
                                      int dtype_bits,
                                      std::span<const DimSlice> slices);

// How a block is moved (see the file comment).
enum class Placement { kContiguous, kRowRuns, kStrided };
const char* PlacementName(Placement p);

struct PlaceOptions {
  uint64_t granularity = 1;  // the file's read alignment
  // The largest read a strided chunk may make (the staging slot); 0
  // forbids strided placements (a path with no staging: GDS).
  uint64_t max_chunk_bytes = 0;
  // What one more read costs, in bytes moved (File::read_cost_bytes of the
  // file read): 0 for the page cache, where a tensor-parallel rank then
  // reads no more than its share; more where requests cost more than bytes.
  uint64_t read_cost_bytes = 0;
  // The path copies the selected bytes straight out of memory it does not
  // read (a mapping registered ahead, cuda/registered_pages.h): a strided
  // placement then moves only those bytes, so every block that fits a
  // chunk is placed strided (one copy per chunk, not one per row).
  bool covering_is_free = false;
};

// Bytes a block costs to move each way at the options' granularity
// (aligned bytes + read_cost per read).
uint64_t RowRunsCost(const RowBlock& b, const PlaceOptions& o);
uint64_t StridedCost(const RowBlock& b, const PlaceOptions& o);

// Appends to SEGMENTS the segments that move SEL into DST (the selection's
// bytes back to back) as request tensor REQUEST. Adds its placement to
// COUNTS' slice counts (the report's; exec/read_counts.h says them in
// words).
void PlaceSelection(const TensorSelection& sel, uintptr_t dst, uint32_t request,
                    const PlaceOptions& options, std::vector<Segment>* segments,
                    ReadCounts* counts);

}  // namespace weightlift::internal
