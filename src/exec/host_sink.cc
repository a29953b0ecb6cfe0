#include "exec/host_sink.h"

#include <cstring>

#include "exec/executor.h"

namespace weightlift::internal {
namespace {

// SC's bytes from the bounce SLOT to host memory: one memcpy, or one per
// row of a strided scatter (the rows land back to back).
void CopyOut(const std::byte* slot, const Scatter& sc) {
  auto* dst = reinterpret_cast<std::byte*>(sc.dst);
  const std::byte* src = slot + sc.chunk_offset;
  if (sc.rows <= 1) {
    std::memcpy(dst, src, sc.length);
    return;
  }
  for (uint64_t r = 0; r < sc.rows; ++r) {
    std::memcpy(dst + r * sc.length, src + r * sc.src_pitch, sc.length);
  }
}

}  // namespace

StatusOr<SinkSlot> HostSink::AcquireSlot(int, const ReadChunk&,
                                         CompletionTracker&) {
  const int i = bounce_.Acquire();
  return SinkSlot{bounce_.slot(i), i, false};
}

Status HostSink::Deliver(int, const ReadChunk& c, SinkSlot slot,
                         CompletionTracker& done) {
  for (const Scatter& sc : c.scatters) CopyOut(slot.data, sc);
  bounce_.Release(slot.index);
  done.Delivered(c);
  return Status::OK();
}

void HostSink::Abandon(int, SinkSlot slot) { bounce_.Release(slot.index); }

Status RunHostPlan(const Plan& plan, std::span<File* const> files,
                   ThreadPool& pool, BouncePool& bounce) {
  CompletionTracker done(plan.pieces_per_tensor.size(), nullptr, nullptr,
                         plan.bytes_delivered);
  done.AddPieces(plan);
  done.Start();
  HostSink sink(bounce);
  RunPlan(plan, files, sink, pool, RunOptions{}, done, nullptr);
  return done.first_error();
}

}  // namespace weightlift::internal
