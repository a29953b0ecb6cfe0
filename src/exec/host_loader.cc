// The host loader: checkpoints into host memory.
//
// Load() and LoadSlices() lay the requested tensors out in one allocation.
// For a file read with O_DIRECT each tensor is placed as in the file: at an
// address congruent to its file offset modulo 4096 (its element alignment
// is kept: safetensors data starts at 8 mod 64, so such tensors are 8-byte,
// not 64-byte, aligned). A file's tensors that follow each other in the
// file then follow each other in memory too, and the planner reads the
// whole run straight into place: only its first and last blocks go through
// the bounce pool (allocated once when the loader is created). Small
// tensors that do not continue their file neighbour, slices that are not
// one range, and every buffered read are 64-byte aligned; buffered reads
// land in place at any alignment.
//
// Load()'s fresh destination is faulted in by a Populator thread running
// ahead of the readers (populator.h), so first-touch cost overlaps storage
// reads. Small destinations freed by earlier loads are reused
// (HostBufferCache) and need no populating.
//
// This file is the host's LoadTarget (load_target.h): the layout, the
// bounce pool and HostSink, the thread counts. Requests, planning, the read
// loop and the report are the one Loader's (loader_core.h).
#include "exec/host_loader.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "exec/bounce_pool.h"
#include "exec/host_buffer_cache.h"
#include "exec/host_sink.h"
#include "exec/load_target.h"
#include "exec/loader_core.h"
#include "exec/thread_pool.h"
#include "util/clock.h"
#include "util/thread_count.h"
#include "weightlift/dtype.h"

namespace weightlift::internal {
namespace {

constexpr uint64_t kTensorAlign = 64;
constexpr uint64_t kPageAlign = 4096;
// Load() destinations stay on 4 KiB pages (no MADV_HUGEPAGE). On the
// development VM the first touch of fresh huge pages costs 0.4-0.6 GB/s of
// CPU (the hypervisor backs each 2 MiB page on demand) against about 3 GB/s
// for 4 KiB pages, and only huge pages recycled within the same process are
// fast (about 20 GB/s). Measured: warm Load() of 3.24 GB: 3.4-3.9 GB/s on
// 4 KiB pages, 0.8-2.4 GB/s with MADV_HUGEPAGE
// (bench/results/host-2core-vm.md). Again 2026-12-03 (bench/first_touch.py,
// a fresh process populating 2 GiB): 1.6-2.7 GB/s on 4 KiB pages,
// 0.36-0.97 GB/s with MADV_HUGEPAGE, 9-10 GB/s only when the same process
// maps freed memory again (likely because the VM reports freed 8 MiB
// blocks back to the host, page_reporting_order=11, and the host faults
// them in again on first use).

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Largest Load() destination the buffer cache keeps for reuse: beyond it
// the saved first touch is small next to the load itself.
constexpr uint64_t kCachedBufferMaxBytes = uint64_t{32} << 20;

class HostTarget final : public LoadTarget {
 public:
  HostTarget(const LoadOptions& options, std::unique_ptr<BouncePool> bounce,
             int warm_threads, int cold_threads)
      : options_(options),
        bounce_(std::move(bounce)),
        sink_(*bounce_),
        buffers_(HostBufferCache::Create(options.host_buffer_cache_bytes,
                                         kCachedBufferMaxBytes)),
        warm_threads_(warm_threads),
        cold_threads_(cold_threads),
        pool_(std::max(warm_threads, cold_threads)) {}

  // Not OK when the system refused a worker thread (see ThreadPool).
  const Status& pool_status() const { return pool_.status(); }

  Device device() const override { return Device::Cpu(); }
  ThreadPool& pool() override { return pool_; }
  std::span<std::byte> read_memory() const override {
    return bounce_->memory();
  }
  // What Allocate cannot place as in the file: small tensors and slices
  // that are not one range, plus the partial first and last block of each
  // tensor read in place. A whole-tensor load of large tensors passes a
  // few KiB per tensor through the bounce pool, so registering the pool
  // (faulting in and pinning 128 MiB: 0.07-0.2 s of a 3.2 GB cold load on
  // the development VM) does not repay.
  uint64_t BounceBytes(std::span<const TensorSelection> sels) const override {
    uint64_t bytes = 0;
    for (const TensorSelection& sel : sels) {
      const bool in_place = sel.blocks.size() == 1 && sel.blocks[0].rows == 1 &&
                            sel.bytes >= options_.direct_min_bytes;
      bytes +=
          in_place ? std::min<uint64_t>(sel.bytes, 2 * kPageAlign) : sel.bytes;
    }
    return bytes;
  }
  Status BeginLoad(LoadReport* report) override {
    report->staging_bytes = bounce_->total_bytes();
    return Status::OK();
  }
  Status CheckDestinations(std::span<const Destination>) override {
    return Status::OK();  // host pointers: nothing more to know about them
  }
  StatusOr<Allocation> Allocate(const Checkpoint& ckpt,
                                std::span<const TensorSelection> sels,
                                const std::vector<OpenedFile>& opened,
                                LoadReport* report) override;
  StatusOr<Routing> Route(const Checkpoint& ckpt,
                          std::span<const TensorSelection> sels,
                          const std::vector<bool>& needed,
                          const std::vector<OpenedFile>& opened,
                          LoadReport* report) override;
  void EndLoad(const ExecStats& stats, LoadReport* report) override;

 private:
  const LoadOptions options_;
  std::unique_ptr<BouncePool> bounce_;
  HostSink sink_;
  std::shared_ptr<HostBufferCache> buffers_;  // Load()'s destinations
  // Workers per load: warm_threads_ when every file is buffered (the
  // page-cache copy is CPU-bound: one per core), cold_threads_ when any is
  // O_DIRECT (I/O-bound: more than cores, so the device keeps requests
  // queued while some workers copy out of the bounce buffer).
  int warm_threads_;
  int cold_threads_;
  int route_threads_ = 0;  // the last Route's: this load's thread count
  ThreadPool pool_;
};

StatusOr<Allocation> HostTarget::Allocate(const Checkpoint& ckpt,
                                          std::span<const TensorSelection> sels,
                                          const std::vector<OpenedFile>& opened,
                                          LoadReport* report) {
  // Layout: see the file comment.
  const auto ta = Clock::now();
  std::vector<uint64_t> pos(sels.size());
  uint64_t end = 0;
  for (size_t k = 0; k < sels.size(); ++k) {
    const TensorSelection& sel = sels[k];
    const File* f = opened[sel.file].file.get();
    const uint64_t falign = f != nullptr ? f->alignment() : 1;
    const uint64_t offset = sel.first_offset();
    const uint64_t elem = std::max<uint64_t>(
        1,
        static_cast<uint64_t>(DTypeBits(ckpt.tensors()[sel.tensor].dtype)) / 8);
    uint64_t p = AlignUp(end, kTensorAlign);
    if (falign > 1 && sel.blocks.size() == 1 && sel.blocks[0].rows == 1 &&
        offset % elem == 0) {
      // As in the file: congruent to the offset modulo the block size. For
      // a small tensor only where that costs no padding (it continues the
      // previous one in the file), so that it joins its neighbours' run.
      const uint64_t a = std::max(falign, kPageAlign);
      uint64_t q = AlignUp(end, a) + offset % a;
      if (q >= end + a) q -= a;
      if (sel.bytes >= options_.direct_min_bytes || q == end) p = q;
    }
    pos[k] = p;
    end = p + sel.bytes;
  }
  WL_ASSIGN_OR_RETURN(HostBufferCache::Buffer buffer, buffers_->Acquire(end));
  Allocation a;
  a.owner = std::move(buffer.memory);
  a.fresh_host = buffer.fresh;
  a.dsts.resize(sels.size());
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.owner.get());
  for (size_t k = 0; k < sels.size(); ++k) a.dsts[k] = base + pos[k];
  report->alloc_seconds = SecondsSince(ta);
  return a;
}

StatusOr<Routing> HostTarget::Route(const Checkpoint& ckpt,
                                    std::span<const TensorSelection>,
                                    const std::vector<bool>& needed,
                                    const std::vector<OpenedFile>& opened,
                                    LoadReport* report) {
  Routing routing;
  routing.files.resize(ckpt.files().size());
  bool any_direct = false;
  for (size_t i = 0; i < opened.size(); ++i) {
    FileRoute& fr = routing.files[i];
    fr.plan.size = ckpt.files()[i].size;
    fr.report_index = static_cast<int>(report->files.size());
    report->files.push_back(opened[i].report);
    File* f = opened[i].file.get();
    if (f == nullptr || !needed[i]) continue;
    fr.route = 0;
    fr.file = f;
    fr.plan.alignment = f->alignment();
    fr.granularity = fr.plan.alignment;
    // A remote object (no descriptor, its own reads) is latency-bound like
    // O_DIRECT: it gets the cold thread count too.
    const bool remote = f->native_fd() < 0 && f->backend_name() != "memory";
    any_direct = any_direct || fr.plan.alignment > 1 || remote;
  }
  struct Route r;
  r.sink = &sink_;
  r.threads = any_direct ? cold_threads_ : warm_threads_;
  route_threads_ = r.threads;
  r.plan.chunk_bytes = options_.chunk_bytes;
  r.plan.direct_min_bytes = options_.direct_min_bytes;
  routing.routes.push_back(r);
  return routing;
}

void HostTarget::EndLoad(const ExecStats& stats, LoadReport* report) {
  report->threads = stats.threads;
  if (std::string note = SharedCoresNote(options_.threads, route_threads_,
                                         std::thread::hardware_concurrency(),
                                         options_.local_world_size);
      !note.empty()) {
    report->notes.push_back(std::move(note));
  }
  // Said in words, once for the whole load (exec/read_counts.h).
  report->counts.direct_reads += stats.direct_chunks;
  report->counts.bounced_reads += stats.bounce_chunks;
}

}  // namespace

StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options) {
  return CreateHostLoader(options, nullptr);
}

StatusOr<std::unique_ptr<Loader>> CreateHostLoader(const LoadOptions& options,
                                                   FileWrapper wrap) {
  WL_RETURN_IF_ERROR(options.Validate());
  if (options.device.is_cuda()) {
    return Status::InvalidArgument("the host loader serves device cpu, not " +
                                   options.device.ToString());
  }
  // threads = 0: see ThreadUse (and HostTarget::cold_threads_).
  const unsigned cores = std::thread::hardware_concurrency();
  const int sharing = options.local_world_size;
  const int warm =
      ThreadCount(options.threads, ThreadUse::kBufferedReads, cores, sharing);
  const int cold =
      ThreadCount(options.threads, ThreadUse::kDirectReads, cores, sharing);
  const auto t_setup = Clock::now();
  // Slots hold one chunk aligned up to 4096 (the planner never makes a
  // bounce chunk larger than chunk_bytes rounded down to the alignment).
  WL_ASSIGN_OR_RETURN(
      std::unique_ptr<BouncePool> bounce,
      BouncePool::Create(options.staging_bytes, options.chunk_bytes));
  auto target =
      std::make_unique<HostTarget>(options, std::move(bounce), warm, cold);
  WL_RETURN_IF_ERROR(target->pool_status());
  return MakeLoader(options, std::move(target), std::move(wrap),
                    SecondsSince(t_setup));
}

}  // namespace weightlift::internal
