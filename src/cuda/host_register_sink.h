// HostRegisterSink: cuda:N zero-copy from the page cache. Each file is
// mapped (File::Map, by the path choice); a chunk's pages are populated and
// cudaHostRegister'ed read-only, and that registered piece of the mapping
// is the chunk's slot: nothing is read, the copies go straight from the
// mapping. The piece is unregistered once its event completed. Each worker
// keeps two pieces in flight, so registering piece i+1 overlaps copying
// piece i.
//
// It also serves the in-place chunks of a staged file whose pages prepare
// registered ahead (registered_pages.h; exec/split_sink.h sends it those
// and nothing else of the file): then nothing is registered here. auto
// never picks it to register on the load's clock, which loses to pinned
// staging on the H200 (path_choice.cc); host_register=on asks for that.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_util.h"
#include "env/mapping.h"
#include "exec/sink.h"

namespace weightlift::internal {

// Whether a device can copy straight from a registered read-only file
// mapping, and if not, why (naming the device attribute).
struct HostRegisterSupport {
  bool ok = false;
  std::string why;  // empty when ok
};
HostRegisterSupport QueryHostRegisterSupport(int device);

class HostRegisterSink final : public Sink {
 public:
  // Two PIECE_EVENTS per worker. Worker w copies on STREAMS[w %
  // STREAMS.size()] (not owned) to DEVICE.
  HostRegisterSink(CudaEvents piece_events, std::vector<cudaStream_t> streams,
                   int device);

  // The load's mappings: MAPPINGS[f] is all of checkpoint file f (null
  // where this sink does not read f). They must outlive the load's run.
  // Where REGISTERED_AHEAD[f], prepare registered the pages of file f's
  // in-place chunks (ReadChunk::in_place, the only chunks of f this sink
  // gets): it copies from them as they are, registering and unregistering
  // nothing.
  void UseMappings(std::vector<const Mapping*> mappings,
                   std::vector<bool> registered_ahead) {
    mappings_ = std::move(mappings);
    registered_ahead_ = std::move(registered_ahead);
  }

  // Chunks are page-aligned pieces of a mapping, of any size.
  uint64_t slot_bytes() const override { return UINT64_MAX; }
  Status BeginWorker(int worker) override;
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override;
  void Abandon(int worker, SinkSlot slot) override;
  void Drain(int worker, CompletionTracker& done) override;

 private:
  struct Held {
    void* base = nullptr;
    cudaEvent_t ev = nullptr;
    const ReadChunk* chunk = nullptr;  // registered; null when free
    bool enqueued = false;             // every copy of chunk was enqueued
    bool registered_here = false;      // unregister when retired
  };
  struct Worker {
    Held held[2];
    int next = 0;
    cudaStream_t stream = nullptr;
  };
  // Waits for H's copies, unregisters it and, when all its copies were
  // enqueued and completed, reports its chunk to DONE.
  Status Retire(Held& h, CompletionTracker& done);

  CudaEvents events_;
  int device_;
  std::vector<Worker> workers_;
  std::vector<const Mapping*> mappings_;
  std::vector<bool> registered_ahead_;
  // Cleared by the first kernel without MADV_POPULATE_READ.
  std::atomic<bool> populate_ok_{true};
};

}  // namespace weightlift::internal
