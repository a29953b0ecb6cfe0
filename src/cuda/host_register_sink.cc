#include "cuda/host_register_sink.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "cuda/cuda_config.h"
#include "cuda/scatter_copy.h"
#include "env/io_util.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace weightlift::internal {

HostRegisterSupport QueryHostRegisterSupport(int device) {
  int reg = 0, reg_ro = 0;
  cudaDeviceGetAttribute(&reg, cudaDevAttrHostRegisterSupported, device);
  cudaDeviceGetAttribute(&reg_ro, cudaDevAttrHostRegisterReadOnlySupported,
                         device);
  (void)cudaGetLastError();
  HostRegisterSupport s;
  s.ok = reg && reg_ro;
  if (!s.ok) {
    s.why = std::string("cuda:") + std::to_string(device) +
            (reg ? " cannot register read-only host memory "
                   "(cudaDevAttrHostRegisterReadOnlySupported=0)"
                 : " cannot register host memory "
                   "(cudaDevAttrHostRegisterSupported=0)");
  }
  return s;
}

HostRegisterSink::HostRegisterSink(CudaEvents piece_events,
                                   std::vector<cudaStream_t> streams,
                                   int device)
    : events_(std::move(piece_events)), device_(device) {
  workers_.resize(events_.size() / 2);
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w].held[0].ev = events_[2 * w];
    workers_[w].held[1].ev = events_[2 * w + 1];
    workers_[w].stream =
        streams.empty() ? nullptr : streams[w % streams.size()];
  }
}

Status HostRegisterSink::BeginWorker(int w) {
  if (static_cast<size_t>(w) >= workers_.size()) {
    return Status::Internal("host-register worker " + std::to_string(w) +
                            " has no events (" +
                            std::to_string(workers_.size()) + " workers)");
  }
  Worker& wk = workers_[w];
  wk.next = 0;
  for (Held& h : wk.held) {
    h.chunk = nullptr;
    h.enqueued = false;
  }
  return UseDevice(device_);
}

Status HostRegisterSink::Retire(Held& h, CompletionTracker& done) {
  const cudaError_t e = cudaEventSynchronize(h.ev);
  const cudaError_t u = std::exchange(h.registered_here, false)
                            ? cudaHostUnregister(h.base)
                            : cudaSuccess;
  const ReadChunk* c = std::exchange(h.chunk, nullptr);
  if (e != cudaSuccess) {
    return CudaStatus(e, "cudaEventSynchronize (host-register piece)");
  }
  if (u != cudaSuccess) return CudaStatus(u, "cudaHostUnregister");
  if (h.enqueued) done.Delivered(*c);
  return Status::OK();
}

StatusOr<SinkSlot> HostRegisterSink::AcquireSlot(int w, const ReadChunk& c,
                                                 CompletionTracker& done) {
  Worker& wk = workers_[w];
  const Mapping* m = c.file < mappings_.size() ? mappings_[c.file] : nullptr;
  if (m == nullptr) {
    return Status::Internal("host-register: file " + std::to_string(c.file) +
                            " is not mapped");
  }
  std::byte* base = m->data() + c.offset;
  const uint64_t len = c.length;
  if (c.file < registered_ahead_.size() && registered_ahead_[c.file]) {
    // Registered by prepare: the piece is the slot as it is. Only the
    // chunks planned in place lie in registered spans (SplitSink sends
    // the file's others to staging).
    if (!c.in_place) {
      return Status::Internal(
          "host-register: a chunk at offset " + std::to_string(c.offset) +
          " of file " + std::to_string(c.file) +
          " is not in place, but its file's pages were registered ahead");
    }
    const int i = wk.next;
    wk.next ^= 1;
    Held& h = wk.held[i];
    if (h.chunk != nullptr) WL_RETURN_IF_ERROR(Retire(h, done));
    h.base = base;
    h.chunk = &c;
    h.enqueued = false;
    h.registered_here = false;
    return SinkSlot{base, i, /*filled=*/true};
  }
  // Fault the piece's pages in first (a page-table walk over cached pages);
  // registering then only pins them. Best effort: kernels before 5.14 lack
  // MADV_POPULATE_READ and registration faults instead.
  if (populate_ok_.load(std::memory_order_relaxed) &&
      madvise(base, AlignUp(len, kPageBytes), MADV_POPULATE_READ) != 0) {
    const int err = errno;
    if (err != EINVAL) {
      return Status::IoErrorFromErrno("madvise(MADV_POPULATE_READ) offset " +
                                          std::to_string(c.offset) +
                                          " length " + std::to_string(len),
                                      err);
    }
    populate_ok_ = false;
  }
  const int i = wk.next;
  wk.next ^= 1;
  Held& h = wk.held[i];
  if (h.chunk != nullptr) WL_RETURN_IF_ERROR(Retire(h, done));
  const cudaError_t e = cudaHostRegister(base, len, cudaHostRegisterReadOnly);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus(e, "cudaHostRegister(ReadOnly) of " +
                             std::to_string(len) + " bytes at offset " +
                             std::to_string(c.offset));
  }
  h.base = base;
  h.chunk = &c;
  h.enqueued = false;
  h.registered_here = true;
  return SinkSlot{base, i, /*filled=*/true};
}

Status HostRegisterSink::Deliver(int w, const ReadChunk& c, SinkSlot slot,
                                 CompletionTracker&) {
  Worker& wk = workers_[w];
  Held& h = wk.held[slot.index];
  Status failed;
  for (const Scatter& sc : c.scatters) {
    failed = CopyScatterToDevice(sc, slot.data, wk.stream);
    if (!failed.ok()) {
      failed = failed.WithContext("registered mapping -> device");
      break;
    }
  }
  h.enqueued = failed.ok();
  // Record even after a failed enqueue so that Retire waits for whatever
  // was enqueued before the piece is unregistered.
  const cudaError_t e = cudaEventRecord(h.ev, wk.stream);
  if (e != cudaSuccess) {
    cudaStreamSynchronize(wk.stream);
    h.enqueued = false;
    if (failed.ok())
      failed = CudaStatus(e, "cudaEventRecord (host-register piece)");
  }
  return failed;
}

void HostRegisterSink::Abandon(int w, SinkSlot slot) {
  Held& h = workers_[w].held[slot.index];
  if (h.chunk == nullptr) return;
  if (std::exchange(h.registered_here, false)) cudaHostUnregister(h.base);
  h.chunk = nullptr;
}

void HostRegisterSink::Drain(int w, CompletionTracker& done) {
  if (static_cast<size_t>(w) >= workers_.size()) return;
  for (Held& h : workers_[w].held) {
    if (h.chunk == nullptr) continue;
    if (Status s = Retire(h, done); !s.ok()) done.Fail(std::move(s));
  }
}

}  // namespace weightlift::internal
