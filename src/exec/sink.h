// Sinks: where a plan's bytes land. The executor (executor.h) is the one
// read loop; a sink is the part that differs per destination:
//
//   HostSink      host memory (fresh or the caller's): direct chunks are
//                 read straight into place, bounce chunks into a slot of
//                 the loader's BouncePool and copied out with memcpy.
//   StagingSink   cuda:N through pinned staging: a ring of pinned slots,
//                 cudaMemcpyAsync / cudaMemcpy2DAsync on the worker's
//                 stream, a slot reused once its event completed.
//   HostRegisterSink  cuda:N zero-copy from the page cache: the slot is the
//                 file's mapping itself, registered with cudaHostRegister.
//   GdsSink       cuda:N through cuFile: the sink performs direct reads.
//   SplitSink     one run over two sinks: in-place chunks (pages prepare
//                 registered) to one, the rest to the other
//                 (split_sink.h).
//
// For each chunk, in plan order, a worker calls either
//   ReadDirect(w, file, chunk)                 (chunk.is_direct())
// or
//   AcquireSlot(w, chunk) -> slot; unless slot.filled, the executor reads
//   the chunk into slot.data (ReadChunkBytes); then Deliver(w, chunk, slot)
//   (or Abandon(w, slot) when the read failed),
// and Drain(w) once after its last chunk, also after an error.
//
// Completion: a sink calls done.Delivered(chunk) once the chunk's bytes are
// in their destination, at once (host) or later, from AcquireSlot/Deliver/
// Drain of the same worker (CUDA, once the slot's event completed). Direct
// chunks are counted by the executor when ReadDirect returns OK.
//
// Threading: each worker index is used by one thread at a time, so state
// kept per worker needs no lock; what workers share needs one. A sink
// serves one run at a time (the loader serializes its loads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "env/file.h"
#include "exec/completion.h"
#include "plan/plan.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// A staging slot a chunk is read into.
struct SinkSlot {
  std::byte* data = nullptr;
  int index = -1;         // the sink's own slot number
  bool filled = false;    // the sink presents the bytes itself: no read
  bool in_place = false;  // SplitSink: the in-place sink's
};

class Sink {
 public:
  virtual ~Sink() = default;

  // The largest bounce chunk a slot holds (aligned up); 0 when the sink
  // takes direct chunks only. The executor checks the plan against it.
  virtual uint64_t slot_bytes() const = 0;

  // Once per worker and run, before its first chunk (CUDA: the device).
  virtual Status BeginWorker(int worker) {
    (void)worker;
    return Status::OK();
  }

  // Reads direct chunk C of FILE into its destination (c.direct_dst). The
  // default reads into host memory with ReadChunkBytes.
  virtual Status ReadDirect(int worker, File& file, const ReadChunk& c);

  // A slot for bounce chunk C; may wait for one to be free (and then
  // report the chunk that used it to DONE). An error here fails the load.
  virtual StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                         CompletionTracker& done) = 0;
  // C's bytes are in SLOT: move them to the chunk's scatters. The slot is
  // the sink's again (now or once its copies completed).
  virtual Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                         CompletionTracker& done) = 0;
  // The read into SLOT failed: take it back unused.
  virtual void Abandon(int worker, SinkSlot slot) = 0;

  // The worker takes no more chunks: wait for what it has in flight and
  // report it to DONE (or fail DONE). Every slot is idle afterwards.
  virtual void Drain(int worker, CompletionTracker& done) {
    (void)worker;
    (void)done;
  }
};

}  // namespace weightlift::internal
