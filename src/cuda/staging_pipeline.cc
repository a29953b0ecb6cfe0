#include "cuda/staging_pipeline.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "env/io_util.h"
#include "exec/read_chunk.h"

namespace weightlift::internal {

void StagingPipeline::Run(Job& job, const Plan& plan,
                          std::span<File* const> files,
                          std::span<const cudaStream_t> streams, int device,
                          ThreadPool& pool) {
  if (plan.chunks.empty()) return;
  std::atomic<size_t> next{0};
  int n = static_cast<int>(std::min<size_t>(pool.size(), plan.chunks.size()));
  pool.Run(
      [&](int w) {
        Worker(w, job, plan, files, streams[w % streams.size()], device, next);
      },
      n);
}

void StagingPipeline::Worker(int w, Job& job, const Plan& plan,
                             std::span<File* const> files, cudaStream_t stream,
                             int device, std::atomic<size_t>& next) {
  if (Status s = UseDevice(device); !s.ok()) return job.Fail(s);
  struct Slot {
    std::byte* buf;
    cudaEvent_t ev;
    const ReadChunk* chunk = nullptr;  // pending copies, null when free
  };
  std::vector<Slot> slots(slots_per_thread_);
  for (int i = 0; i < slots_per_thread_; ++i) {
    size_t k = static_cast<size_t>(w) * slots_per_thread_ + i;
    slots[i].buf = ring_.data() + k * slot_bytes_;
    slots[i].ev = events_[k];
  }
  // The slot's copies completed: its bytes are on the device.
  auto complete = [&](Slot& s) {
    job.DeliveredChunk(*s.chunk);
    s.chunk = nullptr;
  };
  int cur = 0;
  while (!job.failed.load(std::memory_order_relaxed)) {
    size_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= plan.chunks.size()) break;
    const ReadChunk& c = plan.chunks[i];
    Slot& s = slots[cur];
    cur = (cur + 1) % slots_per_thread_;
    if (s.chunk) {
      cudaError_t e = cudaEventSynchronize(s.ev);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventSynchronize (staging slot)"));
        s.chunk = nullptr;
        break;
      }
      complete(s);
    }
    File* f = files[c.file];
    uint64_t room = AlignUp(c.length, f->alignment());
    if (room > slot_bytes_) {
      job.Fail(Status::Internal(
          "plan chunk of " + std::to_string(c.length) + " bytes at offset " +
          std::to_string(c.offset) + " of " + f->path() +
          " exceeds the staging slot of " + std::to_string(slot_bytes_)));
      break;
    }
    Status st = ReadChunkBytes(*f, c, s.buf);
    if (!st.ok()) {
      job.Fail(st);
      break;
    }
    if (job.failed.load(std::memory_order_relaxed)) break;
    bool ok = true;
    for (const Scatter& sc : c.scatters) {
      // A strided scatter (a slice's rows) is one 2-D copy out of the
      // slot, not one copy per row.
      cudaError_t e =
          sc.rows <= 1 ? cudaMemcpyAsync(reinterpret_cast<void*>(sc.dst),
                                         s.buf + sc.chunk_offset, sc.length,
                                         cudaMemcpyHostToDevice, stream)
                       : cudaMemcpy2DAsync(reinterpret_cast<void*>(sc.dst),
                                           sc.length, s.buf + sc.chunk_offset,
                                           sc.src_pitch, sc.length, sc.rows,
                                           cudaMemcpyHostToDevice, stream);
      if (e != cudaSuccess) {
        const TensorInfo& t = job.ckpt->tensors()[job.tensors[sc.tensor]];
        job.Fail(CudaStatus(e, std::string(sc.rows <= 1 ? "cudaMemcpyAsync"
                                                        : "cudaMemcpy2DAsync") +
                                   " of " + std::to_string(sc.bytes()) +
                                   " bytes of tensor '" + t.name + "' from " +
                                   f->path()));
        ok = false;
        break;
      }
    }
    // Record even after a failed enqueue so that the wait below covers
    // whatever was enqueued before the slot is reused.
    cudaError_t e = cudaEventRecord(s.ev, stream);
    if (e != cudaSuccess) {
      job.Fail(CudaStatus(e, "cudaEventRecord (staging slot)"));
      cudaStreamSynchronize(stream);
      break;
    }
    if (!ok) {
      cudaEventSynchronize(s.ev);
      break;
    }
    s.chunk = &c;
    // Fire on_ready early: retire slots whose copies already finished.
    for (Slot& o : slots) {
      if (&o != &s && o.chunk && cudaEventQuery(o.ev) == cudaSuccess) {
        complete(o);
      }
    }
  }
  // Drain: the staging ring must be idle before it is reused or freed.
  for (Slot& s : slots) {
    if (!s.chunk) continue;
    cudaError_t e = cudaEventSynchronize(s.ev);
    if (e != cudaSuccess) {
      job.Fail(CudaStatus(e, "cudaEventSynchronize (staging drain)"));
    } else {
      complete(s);
    }
    s.chunk = nullptr;
  }
}

}  // namespace weightlift::internal
