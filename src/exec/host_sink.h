// HostSink: a plan's bytes into host memory (a fresh allocation of the
// loader's, or the caller's buffers). Direct chunks are read straight into
// place; bounce chunks are read into a BouncePool slot and copied out with
// memcpy, one per scatter (one per row of a strided scatter). Every chunk is
// complete when Deliver returns.
#pragma once

#include <span>

#include "exec/bounce_pool.h"
#include "exec/sink.h"
#include "exec/thread_pool.h"

namespace weightlift::internal {

class HostSink final : public Sink {
 public:
  // BOUNCE must outlive the sink.
  explicit HostSink(BouncePool& bounce) : bounce_(bounce) {}

  uint64_t slot_bytes() const override { return bounce_.slot_bytes(); }
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override;
  void Abandon(int worker, SinkSlot slot) override;

 private:
  BouncePool& bounce_;
};

// Runs PLAN into host memory with one HostSink over BOUNCE and a tracker of
// its own (no callbacks): the plan's first error, or OK. For tests and
// tools that read ranges the way a load does.
Status RunHostPlan(const Plan& plan, std::span<File* const> files,
                   ThreadPool& pool, BouncePool& bounce);

}  // namespace weightlift::internal
