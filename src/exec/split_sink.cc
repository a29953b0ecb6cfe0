#include "exec/split_sink.h"

namespace weightlift::internal {

Status SplitSink::BeginWorker(int worker) {
  WL_RETURN_IF_ERROR(in_place_.BeginWorker(worker));
  return slots_.BeginWorker(worker);
}

StatusOr<SinkSlot> SplitSink::AcquireSlot(int worker, const ReadChunk& c,
                                          CompletionTracker& done) {
  if (!c.in_place) return slots_.AcquireSlot(worker, c, done);
  WL_ASSIGN_OR_RETURN(SinkSlot slot, in_place_.AcquireSlot(worker, c, done));
  if (!slot.filled) {
    // The executor would read into it: this sink has no place for that.
    in_place_.Abandon(worker, slot);
    return Status::Internal("an in-place chunk at offset " +
                            std::to_string(c.offset) + " of file " +
                            std::to_string(c.file) + " got a slot to read");
  }
  slot.in_place = true;
  return slot;
}

void SplitSink::Abandon(int worker, SinkSlot slot) {
  (slot.in_place ? in_place_ : slots_).Abandon(worker, slot);
}

}  // namespace weightlift::internal
