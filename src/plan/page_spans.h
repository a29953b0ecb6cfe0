// The pages of each file that a load's selections lie in (pure, no I/O):
// what prepare registers with CUDA ahead of a load that then copies straight
// out of the page cache (cuda/registered_pages.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plan/selection.h"

namespace weightlift::internal {

// Bytes [begin, end) of one file, both multiples of the page size.
struct PageSpan {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
  friend bool operator==(const PageSpan&, const PageSpan&) = default;
};

// For each of FILE_SIZES.size() files, the pages SELS' blocks lie in, each
// block from its first byte to its last (a strided block's rows and the
// gaps between them), widened to PAGE and cut at the file's last page;
// sorted, and merged where they overlap or touch, so that no two spans
// share a page (two registrations of one page fail) and every chunk the
// planner makes for these selections at this alignment lies in one span
// (a chunk's read never reaches past its segments' pages). REQUIRES: PAGE
// is a power of two; every block lies in its file.
std::vector<std::vector<PageSpan>> PageSpansOf(
    std::span<const TensorSelection> sels, std::span<const uint64_t> file_sizes,
    uint64_t page);

// Whether [OFFSET, OFFSET + LENGTH) lies in one of SPANS (sorted, disjoint).
bool SpansCover(std::span<const PageSpan> spans, uint64_t offset,
                uint64_t length);

// Whether every block of SELS in file FILE, first byte to last, lies in one
// of SPANS (FILE's spans): the pages prepare registered hold that load.
bool SpansHold(std::span<const PageSpan> spans, uint32_t file,
               std::span<const TensorSelection> sels);

// The bytes SPANS cover.
uint64_t SpanBytes(std::span<const PageSpan> spans);

// prepare registers a selection's pages ahead (cuda/register_ahead.h) only
// while they are at most this many times its bytes, plus two pages (a small
// tensor's first and last pages are mostly its neighbours'). Registering
// costs per page (about 21 ms per GB on an H200, while every CUDA copy of the
// process waits), and a row-parallel part's pages are its tensor's whole
// rows, which every rank registers: n times its bytes at n ranks.
//  - n = 8 (session 21): a rank of Llama-2-7B registering all its pages
//    (5.38 GB for 1.91 GB) loaded no faster alone than staged and slower
//    together (0.74-0.80x of the ceiling against 0.82-0.84x): eight ranks
//    pinning the same pages at once did not finish in time.
//  - n = 2 (session 23, H200): registering the halves of the rows too
//    (8.85 GB of pages for 6.87 GB) took two ranks 212-282 ms at once, past
//    the bench's 0.2 s between prepare and the load; racing it, the pair
//    loaded at 0.84x-0.96x of the ceiling. With the row halves staged
//    (4.89 GB of pages) prepare took 129-144 ms, and the pair loaded at
//    0.94-0.95x, each rank alone at 50.6-51.6 GB/s (48.2-52.4 with them).
// So every row-parallel part is staged, in the same run as the registered
// pages (exec/split_sink.h); column-parallel and replicated parts (1x) are
// registered.
inline constexpr double kMaxRegisteredPerSelected = 1.5;

// SELS split by that rule (MAX_PER_BYTE times the bytes plus two pages of
// PAGE): WORTH keeps the selections whose pages are within it, in order;
// the others are counted.
struct PageCostSplit {
  std::vector<TensorSelection> worth;
  uint64_t left_count = 0;  // selections left out
  uint64_t left_bytes = 0;  // their bytes
  uint64_t left_pages = 0;  // the bytes of their pages
};
PageCostSplit SplitByPageCost(std::vector<TensorSelection> sels,
                              std::span<const uint64_t> file_sizes,
                              uint64_t page, double max_per_byte);

}  // namespace weightlift::internal
