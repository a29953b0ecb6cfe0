#include "plan/page_spans.h"

#include <algorithm>

namespace weightlift::internal {

std::vector<std::vector<PageSpan>> PageSpansOf(
    std::span<const TensorSelection> sels, std::span<const uint64_t> file_sizes,
    uint64_t page) {
  std::vector<std::vector<PageSpan>> raw(file_sizes.size());
  auto down = [page](uint64_t v) { return v & ~(page - 1); };
  auto up = [&](uint64_t v) { return down(v + page - 1); };
  for (const TensorSelection& sel : sels) {
    if (sel.file >= raw.size()) continue;
    const uint64_t last_page = up(file_sizes[sel.file]);
    for (const RowBlock& b : sel.blocks) {
      if (b.rows == 0 || b.width == 0) continue;
      raw[sel.file].push_back(
          {down(b.file_offset),
           std::min(up(b.file_offset + b.span()), last_page)});
    }
  }
  for (std::vector<PageSpan>& spans : raw) {
    std::sort(
        spans.begin(), spans.end(),
        [](const PageSpan& x, const PageSpan& y) { return x.begin < y.begin; });
    std::vector<PageSpan> merged;
    for (const PageSpan& s : spans) {
      if (!merged.empty() && s.begin <= merged.back().end) {
        merged.back().end = std::max(merged.back().end, s.end);
      } else {
        merged.push_back(s);
      }
    }
    spans = std::move(merged);
  }
  return raw;
}

bool SpansCover(std::span<const PageSpan> spans, uint64_t offset,
                uint64_t length) {
  // The last span that begins at or before OFFSET.
  auto it = std::upper_bound(
      spans.begin(), spans.end(), offset,
      [](uint64_t v, const PageSpan& s) { return v < s.begin; });
  if (it == spans.begin()) return false;
  --it;
  return offset + length <= it->end;
}

bool SpansHold(std::span<const PageSpan> spans, uint32_t file,
               std::span<const TensorSelection> sels) {
  for (const TensorSelection& sel : sels) {
    if (sel.file != file) continue;
    for (const RowBlock& b : sel.blocks) {
      if (b.rows == 0 || b.width == 0) continue;
      if (!SpansCover(spans, b.file_offset, b.span())) return false;
    }
  }
  return true;
}

uint64_t SpanBytes(std::span<const PageSpan> spans) {
  uint64_t n = 0;
  for (const PageSpan& s : spans) n += s.bytes();
  return n;
}

PageCostSplit SplitByPageCost(std::vector<TensorSelection> sels,
                              std::span<const uint64_t> file_sizes,
                              uint64_t page, double max_per_byte) {
  PageCostSplit out;
  for (TensorSelection& sel : sels) {
    if (sel.bytes == 0) continue;
    uint64_t pages = 0;
    for (const std::vector<PageSpan>& f :
         PageSpansOf(std::span(&sel, 1), file_sizes, page)) {
      pages += SpanBytes(f);
    }
    const double allowed = max_per_byte * static_cast<double>(sel.bytes) +
                           2.0 * static_cast<double>(page);
    if (static_cast<double>(pages) <= allowed) {
      out.worth.push_back(std::move(sel));
    } else {
      out.left_bytes += sel.bytes;
      out.left_pages += pages;
      ++out.left_count;
    }
  }
  return out;
}

}  // namespace weightlift::internal
