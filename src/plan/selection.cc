#include "plan/selection.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "util/fnv.h"

namespace weightlift::internal {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

std::string Dim(const TensorInfo& t, size_t i) {
  return "tensor '" + t.name + "' dimension " + std::to_string(i) + " (size " +
         std::to_string(t.shape[i]) + ")";
}

bool IsFull(const DimSlice& s, uint64_t dim) {
  return s.start == 0 && s.stop == dim && s.step == 1;
}

// Aligned bytes and number of reads of the rows of B read one by one at
// granularity G (rows whose aligned ranges touch are one read).
//
// This runs for every row-run block of every load, so it must not walk the
// rows: a Llama-2-7B rank 0 of 8 with every tensor row-parallel has 1.4
// million of them, and walking each twice (two 64-bit divisions per row)
// took 18-25 ms of a 60 ms load (session 13, bench/results/
// 2026-12-04-h200-session13/). Row j's aligned range [s_j, e_j) moves up
// with j, so row j + 1 joins row j's read when s_{j+1} <= e_j and otherwise
// leaves the gap s_{j+1} - e_j unread: the bytes are the covering range
// less the gaps, the reads one more than the gaps. A gap depends only on
// row j's offset modulo G, which repeats every G / gcd(PITCH mod G, G)
// rows (every row for buffered reads), so one period is summed.
void RunsBytes(const RowBlock& b, uint64_t g, uint64_t* bytes,
               uint64_t* reads) {
  *bytes = 0;
  *reads = 0;
  if (b.rows == 0) return;
  auto gap_after = [&](uint64_t j) -> uint64_t {
    const uint64_t at = b.file_offset + j * b.pitch;
    const uint64_t next = AlignDown(at + b.pitch, g);
    const uint64_t end = AlignUp(at + b.width, g);
    return next > end ? next - end : 0;
  };
  const uint64_t last = b.rows - 1;  // gaps follow rows 0 .. last - 1
  const uint64_t period = g / std::gcd(b.pitch % g, g);
  const uint64_t rest = last % period;
  uint64_t gaps = 0, breaks = 0, head_gaps = 0, head_breaks = 0;
  for (uint64_t j = 0; j < std::min(last, period); ++j) {
    if (j == rest) {
      head_gaps = gaps;
      head_breaks = breaks;
    }
    const uint64_t gap = gap_after(j);
    gaps += gap;
    breaks += gap > 0 ? 1 : 0;
  }
  if (last > period) {
    gaps = (last / period) * gaps + head_gaps;
    breaks = (last / period) * breaks + head_breaks;
  }
  *bytes = AlignUp(b.file_offset + last * b.pitch + b.width, g) -
           AlignDown(b.file_offset, g) - gaps;
  *reads = 1 + breaks;
}

// What reading row runs of BYTES aligned bytes in READS reads costs.
uint64_t WeighRuns(uint64_t bytes, uint64_t reads, const PlaceOptions& o) {
  return bytes + reads * o.read_cost_bytes;
}

uint64_t CoverBytes(const RowBlock& b, uint64_t g) {
  return AlignUp(b.file_offset + b.span(), g) - AlignDown(b.file_offset, g);
}

// A strided chunk holds whole rows: one row with its alignment slack must
// fit the largest read.
bool StridedFits(const RowBlock& b, const PlaceOptions& o) {
  return o.max_chunk_bytes > 0 &&
         AlignUp(b.width, o.granularity) + o.granularity <= o.max_chunk_bytes;
}

}  // namespace

StatusOr<TensorSelection> SelectSlice(const TensorInfo& t, uint32_t index,
                                      int dtype_bits,
                                      std::span<const DimSlice> slices) {
  TensorSelection sel;
  sel.tensor = index;
  sel.file = t.file;
  const size_t n = t.shape.size();
  if (slices.size() > n) {
    return Status::InvalidArgument(
        "tensor '" + t.name + "' has " + std::to_string(n) +
        " dimensions but the request slices " + std::to_string(slices.size()));
  }
  bool all_full = true;
  for (size_t i = 0; i < slices.size(); ++i) {
    const DimSlice& s = slices[i];
    if (s.step == 0) {
      return Status::InvalidArgument(Dim(t, i) + ": slice step 0");
    }
    if (s.start > t.shape[i] || s.stop > t.shape[i]) {
      return Status::InvalidArgument(
          Dim(t, i) + ": slice [" + std::to_string(s.start) + ":" +
          std::to_string(s.stop) + "] is out of bounds (normalize it first)");
    }
    all_full = all_full && IsFull(s, t.shape[i]);
  }
  if (all_full) {
    sel.shape = t.shape;
    sel.bytes = t.size;
    if (t.size > 0) sel.blocks.push_back({t.offset, t.size, 1, 0});
    return sel;
  }
  sel.whole = false;
  if (dtype_bits <= 0 || dtype_bits % 8 != 0) {
    return Status::Unsupported("tensor '" + t.name + "': its dtype has " +
                               std::to_string(dtype_bits) +
                               "-bit elements; slices need whole bytes, "
                               "load the whole tensor instead");
  }
  std::vector<DimSlice> s(n);
  for (size_t i = 0; i < n; ++i) {
    s[i] = i < slices.size() ? slices[i] : DimSlice{0, t.shape[i], 1};
  }
  // Element counts below each dimension times the element size. The header
  // checks bounded shape x bits, so these products cannot overflow.
  std::vector<uint64_t> stride(n);
  uint64_t acc = static_cast<uint64_t>(dtype_bits / 8);
  for (size_t i = n; i-- > 0;) {
    stride[i] = acc;
    acc *= t.shape[i];
  }
  sel.shape.resize(n);
  sel.bytes = static_cast<uint64_t>(dtype_bits / 8);
  for (size_t i = 0; i < n; ++i) {
    sel.shape[i] = s[i].count();
    sel.bytes *= sel.shape[i];
  }
  if (sel.bytes == 0) return sel;

  // K: the last dimension not taken whole. Everything after it is one
  // contiguous run per index of the dimensions up to K.
  size_t k = n - 1;
  while (IsFull(s[k], t.shape[k])) --k;
  uint64_t width = 0;
  uint64_t base = t.offset;
  std::vector<size_t> row_dims;  // dimensions that repeat runs
  for (size_t i = 0; i < k; ++i) {
    if (sel.shape[i] > 1) {
      row_dims.push_back(i);
    } else {
      base += s[i].start * stride[i];
    }
  }
  if (s[k].step == 1 || sel.shape[k] == 1) {
    width = sel.shape[k] * stride[k];
    base += s[k].start * stride[k];
  } else {
    width = stride[k];
    row_dims.push_back(k);
  }
  if (row_dims.empty()) {
    sel.blocks.push_back({base, width, 1, 0});
    return sel;
  }
  // The innermost repeating dimension J makes the rows of a block; every
  // index of the outer repeating ones is one block.
  const size_t j = row_dims.back();
  row_dims.pop_back();
  const RowBlock proto{0, width, sel.shape[j], s[j].step * stride[j]};
  base += s[j].start * stride[j];
  std::vector<uint64_t> idx(row_dims.size(), 0);
  while (true) {
    uint64_t off = base;
    for (size_t d = 0; d < row_dims.size(); ++d) {
      const size_t i = row_dims[d];
      off += (s[i].start + idx[d] * s[i].step) * stride[i];
    }
    RowBlock b = proto;
    b.file_offset = off;
    sel.blocks.push_back(b);
    size_t d = row_dims.size();
    while (d > 0 && ++idx[d - 1] == sel.shape[row_dims[d - 1]]) {
      idx[--d] = 0;
    }
    if (d == 0) break;
  }
  return sel;
}

const char* PlacementName(Placement p) {
  switch (p) {
    case Placement::kContiguous:
      return "contiguous";
    case Placement::kRowRuns:
      return "row runs";
    case Placement::kStrided:
      return "strided";
  }
  return "?";
}

uint64_t RowRunsCost(const RowBlock& b, const PlaceOptions& o) {
  uint64_t bytes = 0, reads = 0;
  RunsBytes(b, std::max<uint64_t>(o.granularity, 1), &bytes, &reads);
  return WeighRuns(bytes, reads, o);
}

uint64_t StridedCost(const RowBlock& b, const PlaceOptions& o) {
  if (!StridedFits(b, o)) return std::numeric_limits<uint64_t>::max();
  const uint64_t cover = CoverBytes(b, std::max<uint64_t>(o.granularity, 1));
  const uint64_t reads = (cover + o.max_chunk_bytes - 1) / o.max_chunk_bytes;
  return cover + reads * o.read_cost_bytes;
}

void PlaceSelection(const TensorSelection& sel, uintptr_t dst, uint32_t request,
                    const PlaceOptions& o, std::vector<Segment>* segments,
                    ReadCounts* counts) {
  const uint64_t g = std::max<uint64_t>(o.granularity, 1);
  if (!sel.whole) {
    ++counts->slices;
    counts->slice_bytes_selected += sel.bytes;
    counts->slice_read_cost_bytes =
        std::max(counts->slice_read_cost_bytes, o.read_cost_bytes);
  }
  uintptr_t at = dst;
  for (const RowBlock& b : sel.blocks) {
    const uint64_t bytes = b.width * b.rows;
    if (b.rows == 1) {
      segments->push_back({sel.file, b.file_offset, b.width, at, request});
      if (!sel.whole) {
        ++counts->contiguous_slices;
        // From memory registered ahead nothing is read in blocks.
        counts->slice_bytes_read +=
            o.covering_is_free ? b.width : CoverBytes(b, g);
      }
      at += bytes;
      continue;
    }
    uint64_t moved = 0, reads = 0;
    RunsBytes(b, g, &moved, &reads);
    const bool free_cover = o.covering_is_free && StridedFits(b, o);
    if (free_cover || StridedCost(b, o) <= WeighRuns(moved, reads, o)) {
      Segment seg{sel.file, b.file_offset, b.width, at, request};
      seg.rows = b.rows;
      seg.pitch = b.pitch;
      segments->push_back(seg);
      ++counts->strided_slices;
      counts->strided_rows += b.rows;
      counts->slice_bytes_read += free_cover ? bytes : CoverBytes(b, g);
    } else {
      // Row runs: one gather segment; the planner reads its rows one by
      // one, packed back to back (or row by row where it cannot gather).
      Segment seg{sel.file, b.file_offset, b.width, at, request};
      seg.rows = b.rows;
      seg.pitch = b.pitch;
      seg.gather = true;
      segments->push_back(seg);
      ++counts->row_run_slices;
      counts->row_run_reads += reads;
      counts->slice_bytes_read += moved;
    }
    at += bytes;
  }
}

uint64_t SelectionsDigest(std::span<const TensorSelection> sels) {
  Fnv f;
  f.U64(sels.size());
  for (const TensorSelection& s : sels) {
    f.U64(s.tensor);
    f.U64(s.file);
    f.U64(s.blocks.size());
    for (const RowBlock& b : s.blocks) {
      f.U64(b.file_offset);
      f.U64(b.width);
      f.U64(b.rows);
      f.U64(b.pitch);
    }
  }
  return f.h;
}

}  // namespace weightlift::internal
