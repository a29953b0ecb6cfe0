// MakePlan: segments -> aligned read chunks.
//
// For each segment whose destination agrees with its file offset modulo the
// file's alignment (and which is large enough and allowed), the aligned
// interior becomes direct chunks of at most chunk_bytes. Everything else
// (edges, small segments, misaligned destinations, files that forbid direct)
// becomes a "bounce range"; bounce ranges of one file are sorted and packed
// greedily into bounce chunks whose aligned read span is at most chunk_bytes.
// A range joins the open chunk when it starts inside or right after the
// chunk's last aligned block, so a block shared by the tail of one tensor and
// the head of the next is read once. Chunks come out sorted by (file,
// offset) so that threads taking them in order read each file front to back.
#include "plan/plan.h"

#include <algorithm>
#include <cassert>

namespace weightlift::internal {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

struct BounceRange {
  uint32_t file;
  uint64_t offset;
  uint64_t length;
  uintptr_t dst;
  uint32_t tensor;
};

class BouncePacker {
 public:
  BouncePacker(const PlanFile& file, uint32_t file_index, uint64_t cap,
               Plan* plan)
      : file_(file), index_(file_index), cap_(cap), plan_(plan) {}

  // REQUIRES: ranges are added in increasing offset order.
  void Add(const BounceRange& r) {
    const uint64_t a = file_.alignment;
    uint64_t pos = r.offset;
    const uint64_t end = r.offset + r.length;
    while (pos < end) {
      // Join the open chunk if POS is inside its last aligned block or
      // right after it, and there is room before the cap.
      if (open_ &&
          (AlignDown(pos, a) > AlignUp(max_end_, a) || pos >= start_ + cap_)) {
        Close();
      }
      if (!open_) {
        open_ = true;
        start_ = AlignDown(pos, a);
        max_end_ = pos;
        chunk_ = ReadChunk{};
        chunk_.file = index_;
        chunk_.offset = start_;
      }
      const uint64_t take = std::min(end, start_ + cap_) - pos;
      chunk_.scatters.push_back(
          Scatter{pos - start_, r.dst + (pos - r.offset), take, r.tensor});
      max_end_ = std::max(max_end_, pos + take);
      pos += take;
    }
  }

  void Close() {
    if (!open_) return;
    open_ = false;
    const uint64_t a = file_.alignment;
    // Aligned end, except that the last block of the file is read only up
    // to the end of the file (the backend rounds the request itself).
    const uint64_t end = std::min(AlignUp(max_end_, a), file_.size);
    chunk_.length = end - start_;
    plan_->max_bounce_bytes =
        std::max(plan_->max_bounce_bytes, AlignUp(chunk_.length, a));
    plan_->chunks.push_back(std::move(chunk_));
  }

 private:
  const PlanFile& file_;
  uint32_t index_;
  uint64_t cap_;
  Plan* plan_;
  bool open_ = false;
  uint64_t start_ = 0;
  uint64_t max_end_ = 0;
  ReadChunk chunk_;
};

}  // namespace

Plan MakePlan(std::span<const Segment> segments,
              std::span<const PlanFile> files, size_t num_tensors,
              const PlanOptions& options) {
  Plan plan;
  plan.pieces_per_tensor.assign(num_tensors, 0);
  std::vector<BounceRange> bounce;

  auto cap_for = [&](const PlanFile& f) {
    const uint64_t a = std::max<uint64_t>(f.alignment, 1);
    return std::max(a,
                    AlignDown(std::max<uint64_t>(options.chunk_bytes, 1), a));
  };

  for (const Segment& s : segments) {
    if (s.length == 0) continue;
    assert(s.file < files.size());
    assert(s.tensor < num_tensors);
    plan.bytes_delivered += s.length;
    const PlanFile& f = files[s.file];
    const uint64_t a = std::max<uint64_t>(f.alignment, 1);
    const uint64_t end = s.file_offset + s.length;
    uint64_t lo = end, hi = end;  // the direct interior, empty by default
    if (f.allow_direct && s.length >= options.direct_min_bytes &&
        s.dst % a == s.file_offset % a) {
      lo = AlignUp(s.file_offset, a);
      hi = AlignDown(end, a);
      if (hi <= lo) lo = hi = end;
    }
    if (lo > s.file_offset) {
      bounce.push_back({s.file, s.file_offset,
                        std::min(lo, end) - s.file_offset, s.dst, s.tensor});
    }
    if (hi > lo) {
      const uint64_t cap = cap_for(f);
      for (uint64_t p = lo; p < hi; p += cap) {
        const uint64_t n = std::min(cap, hi - p);
        ReadChunk c;
        c.file = s.file;
        c.offset = p;
        c.length = n;
        c.direct_dst = s.dst + (p - s.file_offset);
        c.scatters.push_back(Scatter{0, c.direct_dst, n, s.tensor});
        plan.chunks.push_back(std::move(c));
      }
      if (end > hi) {
        bounce.push_back(
            {s.file, hi, end - hi, s.dst + (hi - s.file_offset), s.tensor});
      }
    }
  }

  std::stable_sort(bounce.begin(), bounce.end(),
                   [](const BounceRange& x, const BounceRange& y) {
                     return x.file != y.file ? x.file < y.file
                                             : x.offset < y.offset;
                   });
  for (size_t i = 0; i < bounce.size();) {
    const uint32_t file = bounce[i].file;
    BouncePacker packer(files[file], file, cap_for(files[file]), &plan);
    for (; i < bounce.size() && bounce[i].file == file; ++i) {
      packer.Add(bounce[i]);
    }
    packer.Close();
  }

  std::stable_sort(plan.chunks.begin(), plan.chunks.end(),
                   [](const ReadChunk& x, const ReadChunk& y) {
                     return x.file != y.file ? x.file < y.file
                                             : x.offset < y.offset;
                   });
  for (const ReadChunk& c : plan.chunks) {
    plan.bytes_read += c.length;
    for (const Scatter& sc : c.scatters) ++plan.pieces_per_tensor[sc.tensor];
  }
  return plan;
}

}  // namespace weightlift::internal
