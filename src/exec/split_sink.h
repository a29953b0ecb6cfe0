// SplitSink: one run over two sinks. A route whose plan merges chunks that
// are read into slots with chunks whose bytes are already in place
// (ReadChunk::in_place, plan.h MergeInPlace) gives each worker both kinds
// in file order: the in-place chunks to IN_PLACE (which hands back a
// filled slot: its copies go straight out of memory registered ahead), the
// others to SLOTS. So the copies of pages registered ahead and the reads
// and copies of the rest share one run, and the link stays busy while the
// workers read (cuda_loader.cc: a tensor-parallel rank's row-parallel parts
// are staged beside its registered column-parallel ones).
#pragma once

#include "exec/sink.h"

namespace weightlift::internal {

class SplitSink final : public Sink {
 public:
  // Neither is owned; both must outlive the run.
  SplitSink(Sink& in_place, Sink& slots) : in_place_(in_place), slots_(slots) {}

  // The read chunks' bound: the in-place ones take no slot.
  uint64_t slot_bytes() const override { return slots_.slot_bytes(); }
  Status BeginWorker(int worker) override;
  Status ReadDirect(int worker, File& file, const ReadChunk& c) override {
    return slots_.ReadDirect(worker, file, c);
  }
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override {
    return (c.in_place ? in_place_ : slots_).Deliver(worker, c, slot, done);
  }
  void Abandon(int worker, SinkSlot slot) override;
  void Drain(int worker, CompletionTracker& done) override {
    in_place_.Drain(worker, done);
    slots_.Drain(worker, done);
  }

 private:
  Sink& in_place_;
  Sink& slots_;
};

}  // namespace weightlift::internal
