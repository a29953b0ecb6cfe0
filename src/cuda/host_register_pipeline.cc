#include "cuda/host_register_pipeline.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>

#include "cuda/cuda_config.h"
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

void HostRegisterPipeline::Run(Job& job, const Plan& plan,
                               std::span<const Mapping* const> mappings,
                               std::span<const cudaStream_t> streams,
                               int device, ThreadPool& pool) {
  if (plan.chunks.empty()) return;
  std::atomic<size_t> next{0};
  std::atomic<bool> populate_ok{true};
  auto worker = [&](int w) {
    if (Status s = UseDevice(device); !s.ok()) return job.Fail(s);
    cudaStream_t stream = streams[w % streams.size()];
    struct Held {
      void* base = nullptr;
      cudaEvent_t ev;
      const ReadChunk* chunk = nullptr;  // registered, null when free
      bool enqueued = false;             // every copy of chunk was enqueued
    };
    Held held[2];
    held[0].ev = events_[2 * w];
    held[1].ev = events_[2 * w + 1];
    // Waits for the piece's copies, unregisters it and, when all its copies
    // were enqueued and completed, counts its bytes as delivered.
    auto retire = [&](Held& h) {
      cudaError_t e = cudaEventSynchronize(h.ev);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventSynchronize (host-register piece)"));
      }
      cudaError_t u = cudaHostUnregister(h.base);
      if (u != cudaSuccess && e == cudaSuccess) {
        job.Fail(CudaStatus(u, "cudaHostUnregister"));
      }
      if (e == cudaSuccess && u == cudaSuccess && h.enqueued) {
        job.DeliveredChunk(*h.chunk);
      }
      h.chunk = nullptr;
    };
    int cur = 0;
    while (!job.failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= plan.chunks.size()) break;
      const ReadChunk& c = plan.chunks[i];
      const FileInfo& fi = job.ckpt->files()[c.file];
      std::byte* base = mappings[c.file]->data() + c.offset;
      uint64_t len = c.length;
      // Fault the piece's pages in first (a page-table walk over cached
      // pages); registering then only pins them. Best effort: kernels
      // before 5.14 lack MADV_POPULATE_READ and registration faults instead.
      if (populate_ok.load(std::memory_order_relaxed) &&
          madvise(base, AlignUp(len, kPageBytes), MADV_POPULATE_READ) != 0) {
        int err = errno;
        if (err == EINVAL) {
          populate_ok = false;
        } else {
          job.Fail(Status::IoErrorFromErrno(
              fi.path + ": madvise(MADV_POPULATE_READ) offset " +
                  std::to_string(c.offset) + " length " + std::to_string(len),
              err));
          break;
        }
      }
      Held& h = held[cur];
      cur ^= 1;
      if (h.chunk) retire(h);
      if (job.failed.load(std::memory_order_relaxed)) break;
      cudaError_t e = cudaHostRegister(base, len, cudaHostRegisterReadOnly);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        job.Fail(CudaStatus(e, fi.path + ": cudaHostRegister(ReadOnly) of " +
                                   std::to_string(len) + " bytes at offset " +
                                   std::to_string(c.offset)));
        break;
      }
      h.base = base;
      h.chunk = &c;
      h.enqueued = true;
      for (const Scatter& sc : c.scatters) {
        e = sc.rows <= 1 ? cudaMemcpyAsync(reinterpret_cast<void*>(sc.dst),
                                           base + sc.chunk_offset, sc.length,
                                           cudaMemcpyHostToDevice, stream)
                         : cudaMemcpy2DAsync(reinterpret_cast<void*>(sc.dst),
                                             sc.length, base + sc.chunk_offset,
                                             sc.src_pitch, sc.length, sc.rows,
                                             cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) {
          job.Fail(CudaStatus(e, fi.path + ": cudaMemcpyAsync from the "
                                           "registered mapping"));
          h.enqueued = false;
          break;
        }
      }
      // Record even after a failed enqueue so that retire waits for whatever
      // was enqueued before the piece is unregistered.
      e = cudaEventRecord(h.ev, stream);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventRecord (host-register piece)"));
        cudaStreamSynchronize(stream);
      }
    }
    for (Held& h : held) {
      if (h.chunk) retire(h);
    }
  };
  int n = static_cast<int>(std::min<size_t>(pool.size(), plan.chunks.size()));
  pool.Run(worker, n);
}

}  // namespace weightlift::internal
