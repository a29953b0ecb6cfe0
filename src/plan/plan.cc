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
#include <iterator>

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

  // REQUIRES: ranges are added in increasing offset order (they may
  // overlap).
  void Add(const BounceRange& r) {
    const uint64_t a = file_.alignment;
    uint64_t pos = r.offset;
    const uint64_t end = r.offset + r.length;
    while (pos < end) {
      // Join the open chunk if POS is inside its last aligned block or
      // right after it, and there is room before the cap.
      // A range that starts before the open chunk (it shares file bytes
      // with an earlier, longer one: two slices of one tensor) opens a
      // chunk of its own.
      if (open_ && (pos < start_ || AlignDown(pos, a) > AlignUp(max_end_, a) ||
                    pos >= start_ + cap_)) {
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

// Chunks of whole rows of strided segment S, each covering at most CAP
// aligned bytes.
void PlanStrided(const Segment& s, const PlanFile& f, uint64_t cap,
                 Plan* plan) {
  const uint64_t a = std::max<uint64_t>(f.alignment, 1);
  uint64_t r = 0;
  while (r < s.rows) {
    const uint64_t start = AlignDown(s.file_offset + r * s.pitch, a);
    uint64_t n = 1;  // rows in this chunk; one always fits (REQUIRES)
    while (r + n < s.rows &&
           AlignUp(s.file_offset + (r + n) * s.pitch + s.length, a) - start <=
               cap) {
      ++n;
    }
    const uint64_t last_end = s.file_offset + (r + n - 1) * s.pitch + s.length;
    ReadChunk c;
    c.file = s.file;
    c.offset = start;
    c.length = std::min(AlignUp(last_end, a), f.size) - start;
    Scatter sc{s.file_offset + r * s.pitch - start, s.dst + r * s.length,
               s.length, s.tensor};
    sc.rows = n;
    sc.src_pitch = s.pitch;
    c.scatters.push_back(sc);
    plan->max_bounce_bytes =
        std::max(plan->max_bounce_bytes, AlignUp(c.length, a));
    plan->chunks.push_back(std::move(c));
    r += n;
  }
}

// Chunks of whole rows of gather segment S (alignment 1, S.length <= CAP),
// each reading at most CAP bytes run by run.
void PlanGather(const Segment& s, const PlanFile& f, uint64_t cap, Plan* plan) {
  const uint64_t per_chunk = std::max<uint64_t>(1, cap / s.length);
  for (uint64_t r = 0; r < s.rows; r += per_chunk) {
    const uint64_t n = std::min(per_chunk, s.rows - r);
    ReadChunk c;
    c.file = s.file;
    c.offset = s.file_offset + r * s.pitch;
    c.length = n * s.length;
    c.rows = n;
    c.pitch = n > 1 ? s.pitch : 0;
    const uintptr_t dst = s.dst + r * s.length;
    if (f.allow_direct) {
      c.direct_dst = dst;
    } else {
      plan->max_bounce_bytes = std::max(plan->max_bounce_bytes, c.length);
    }
    c.scatters.push_back(Scatter{0, dst, c.length, s.tensor});
    plan->chunks.push_back(std::move(c));
  }
}

}  // namespace

void AppendRows(const Segment& s, std::vector<Segment>* out) {
  if (s.rows <= 1) {
    out->push_back(s);
    return;
  }
  for (uint64_t r = 0; r < s.rows; ++r) {
    out->push_back(Segment{s.file, s.file_offset + r * s.pitch, s.length,
                           s.dst + r * s.length, s.tensor});
  }
}

uint64_t ChunkBytesFor(uint64_t total, int workers, uint64_t max_chunk,
                       uint64_t floor, uint64_t alignment) {
  const uint64_t a = std::max<uint64_t>(alignment, 1);
  const uint64_t share =
      total / (2 * static_cast<uint64_t>(std::max(workers, 1)));
  const uint64_t chunk = std::min(max_chunk, std::max(share, floor));
  return std::max(a, chunk / a * a);
}

Spread SpreadFor(uint64_t total, int workers, uint64_t max_chunk,
                 uint64_t floor, uint64_t alignment,
                 uint64_t min_worker_bytes) {
  Spread s;
  s.workers = std::max(workers, 1);
  if (min_worker_bytes > 0) {
    const uint64_t keeps_busy = std::max<uint64_t>(total / min_worker_bytes, 1);
    s.workers = static_cast<int>(
        std::min<uint64_t>(keeps_busy, static_cast<uint64_t>(s.workers)));
  }
  s.chunk_bytes = ChunkBytesFor(total, s.workers, max_chunk, floor, alignment);
  return s;
}

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

  // Plain segments in file order; strided and gather ones planned on
  // their own. Gather segments that cannot be gathered become one plain
  // segment per row, stored first so the pointers into it stay valid.
  // Gather needs byte-granular reads and a row that fits one chunk.
  auto gatherable = [&](const Segment& s) {
    const PlanFile& f = files[s.file];
    return f.alignment <= 1 && s.length <= cap_for(f);
  };
  std::vector<Segment> rows_as_segments;
  for (const Segment& s : segments) {
    if (s.bytes() > 0 && s.rows > 1 && s.gather && !gatherable(s)) {
      AppendRows(s, &rows_as_segments);
    }
  }
  std::vector<const Segment*> plain;
  plain.reserve(segments.size() + rows_as_segments.size());
  for (const Segment& s : rows_as_segments) plain.push_back(&s);
  for (const Segment& s : segments) {
    if (s.bytes() == 0) continue;
    assert(s.file < files.size());
    assert(s.tensor < num_tensors);
    plan.bytes_delivered += s.bytes();
    const PlanFile& f = files[s.file];
    if (s.rows > 1 && s.gather) {
      if (gatherable(s)) PlanGather(s, f, cap_for(f), &plan);
    } else if (s.rows > 1) {
      PlanStrided(s, f, cap_for(f), &plan);
    } else {
      plain.push_back(&s);
    }
  }
  std::stable_sort(
      plain.begin(), plain.end(), [](const Segment* x, const Segment* y) {
        return x->file != y->file ? x->file < y->file
                                  : x->file_offset < y->file_offset;
      });

  // A run: plain[i, j) adjacent in the file and in the destination.
  for (size_t i = 0; i < plain.size();) {
    size_t j = i + 1;
    while (j < plain.size() && plain[j]->file == plain[i]->file &&
           plain[j]->file_offset ==
               plain[j - 1]->file_offset + plain[j - 1]->length &&
           plain[j]->dst == plain[j - 1]->dst + plain[j - 1]->length) {
      ++j;
    }
    const Segment& first = *plain[i];
    const PlanFile& f = files[first.file];
    const uint64_t a = std::max<uint64_t>(f.alignment, 1);
    const uint64_t begin = first.file_offset;
    const uint64_t end = plain[j - 1]->file_offset + plain[j - 1]->length;
    uint64_t lo = end, hi = end;  // the direct interior, empty by default
    if (f.allow_direct && end - begin >= options.direct_min_bytes &&
        first.dst % a == begin % a) {
      lo = AlignUp(begin, a);
      hi = AlignDown(end, a);
      if (hi <= lo) lo = hi = end;
    }
    // Each segment's bytes outside [lo, hi) bounce.
    for (size_t k = i; k < j; ++k) {
      const Segment& s = *plain[k];
      const uint64_t s_end = s.file_offset + s.length;
      const uint64_t head_end = std::min(s_end, lo);
      if (head_end > s.file_offset) {
        bounce.push_back(
            {s.file, s.file_offset, head_end - s.file_offset, s.dst, s.tensor});
      }
      const uint64_t tail_begin = std::max(s.file_offset, hi);
      if (hi > lo && s_end > tail_begin) {
        bounce.push_back({s.file, tail_begin, s_end - tail_begin,
                          s.dst + (tail_begin - s.file_offset), s.tensor});
      }
    }
    // [lo, hi) in direct chunks of at most cap; each lists the pieces of
    // the run's segments it delivers.
    const uint64_t cap = cap_for(f);
    size_t k = i;
    for (uint64_t p = lo; p < hi; p += cap) {
      const uint64_t n = std::min(cap, hi - p);
      ReadChunk c;
      c.file = first.file;
      c.offset = p;
      c.length = n;
      c.direct_dst = first.dst + (p - begin);
      while (plain[k]->file_offset + plain[k]->length <= p) ++k;
      for (size_t m = k; m < j && plain[m]->file_offset < p + n; ++m) {
        const Segment& s = *plain[m];
        const uint64_t from = std::max(p, s.file_offset);
        const uint64_t to = std::min(p + n, s.file_offset + s.length);
        c.scatters.push_back(Scatter{from - p, s.dst + (from - s.file_offset),
                                     to - from, s.tensor});
      }
      plan.chunks.push_back(std::move(c));
    }
    i = j;
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

void MergeInPlace(Plan in_place, Plan* plan) {
  for (ReadChunk& c : in_place.chunks) c.in_place = true;
  const auto by_offset = [](const ReadChunk& x, const ReadChunk& y) {
    return x.file != y.file ? x.file < y.file : x.offset < y.offset;
  };
  std::vector<ReadChunk> merged;
  merged.reserve(plan->chunks.size() + in_place.chunks.size());
  std::merge(std::make_move_iterator(plan->chunks.begin()),
             std::make_move_iterator(plan->chunks.end()),
             std::make_move_iterator(in_place.chunks.begin()),
             std::make_move_iterator(in_place.chunks.end()),
             std::back_inserter(merged), by_offset);
  plan->chunks = std::move(merged);
  if (plan->pieces_per_tensor.size() < in_place.pieces_per_tensor.size()) {
    plan->pieces_per_tensor.resize(in_place.pieces_per_tensor.size(), 0);
  }
  for (size_t t = 0; t < in_place.pieces_per_tensor.size(); ++t) {
    plan->pieces_per_tensor[t] += in_place.pieces_per_tensor[t];
  }
  plan->bytes_read += in_place.bytes_delivered;
  plan->bytes_delivered += in_place.bytes_delivered;
}

}  // namespace weightlift::internal
