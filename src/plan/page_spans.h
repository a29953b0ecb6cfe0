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

}  // namespace weightlift::internal
