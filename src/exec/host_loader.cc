// The host loader: Plan + executor into host memory.
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
// ahead of the readers, so first-touch cost overlaps storage reads. Small
// destinations freed by earlier loads are reused (HostBufferCache) and need
// no populating.
#include "exec/host_loader.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "exec/executor.h"
#include "exec/host_buffer_cache.h"
#include "exec/mapped_load.h"
#include "exec/open_files.h"
#include "exec/request.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "util/clock.h"
#include "util/errno_text.h"
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
// (bench/results/host-2core-vm.md).

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

// Largest Load() destination the buffer cache keeps for reuse: beyond it
// the saved first touch is small next to the load itself.
constexpr uint64_t kCachedBufferMaxBytes = uint64_t{32} << 20;

// Faults in the pages of a fresh destination ahead of the readers, in plan
// order, with MADV_POPULATE_WRITE: the kernel allocates (zeroes) the pages
// without writing our data, so it is safe while readers write the same pages
// (memset would not be). First touch of fresh memory is expensive (in a VM
// every new page may also fault in the hypervisor); done here it overlaps
// the storage reads instead of stalling a reader in the middle of its
// memcpy or DMA. Stops at the first refusal (EINVAL before Linux 5.14):
// readers then fault pages in themselves, as without it.
class Populator {
 public:
  Populator(const Plan& plan, std::atomic<size_t>* next_chunk)
      : plan_(plan), next_chunk_(next_chunk) {
    try {
      thread_ = std::thread([this] { Loop(); });
    } catch (const std::system_error& e) {
      refused_ = e.code().value();  // readers fault pages in themselves
    }
  }
  ~Populator() { (void)Finish(); }
  // Stops and joins the thread; returns madvise's errno if the kernel
  // refused (0 if it never did).
  int Finish() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
    return refused_;
  }

 private:
  void Loop() {
    constexpr uintptr_t kPiece = uintptr_t{4} << 20;
    for (size_t i = 0; i < plan_.chunks.size(); ++i) {
      // Chunks the workers already took are being written by them.
      i = std::max(i, next_chunk_->load(std::memory_order_relaxed));
      if (i >= plan_.chunks.size()) return;
      const ReadChunk& c = plan_.chunks[i];
      for (const Scatter& sc : c.scatters) {
        const uintptr_t lo = sc.dst / kPageAlign * kPageAlign;
        const uintptr_t hi = AlignUp(sc.dst + sc.length, kPageAlign);
        for (uintptr_t p = lo; p < hi; p += kPiece) {
          if (stop_.load(std::memory_order_relaxed)) return;
          if (::madvise(reinterpret_cast<void*>(p), std::min(kPiece, hi - p),
                        MADV_POPULATE_WRITE) != 0 &&
              errno != EINTR && errno != EAGAIN) {
            refused_ = errno;
            return;
          }
        }
      }
    }
  }

  const Plan& plan_;
  std::atomic<size_t>* next_chunk_;
  std::atomic<bool> stop_{false};
  int refused_ = 0;
  std::thread thread_;
};

class HostLoader final : public Loader {
 public:
  HostLoader(const LoadOptions& options, std::unique_ptr<BouncePool> bounce,
             int warm_threads, int cold_threads, FileWrapper wrap)
      : options_(options),
        bounce_(std::move(bounce)),
        buffers_(HostBufferCache::Create(options.host_buffer_cache_bytes,
                                         kCachedBufferMaxBytes)),
        warm_threads_(warm_threads),
        cold_threads_(cold_threads),
        pool_(std::max(warm_threads, cold_threads)),
        wrap_(std::move(wrap)) {}

  StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                            std::span<const std::string> names,
                            const LoadCallbacks& callbacks) override;
  StatusOr<LoadResult> LoadSlices(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  const LoadCallbacks& callbacks) override;
  Status LoadInto(const Checkpoint& ckpt, std::span<const Destination> dests,
                  LoadReport* report, const LoadCallbacks& callbacks) override;
  const LoadOptions& options() const override { return options_; }

  // Not OK when the system refused a worker thread (see ThreadPool).
  const Status& pool_status() const { return pool_.status(); }

 private:
  // Zero-copy Load() of whole tensors (options_.zero_copy).
  StatusOr<LoadResult> LoadMappedTensors(const Checkpoint& ckpt,
                                         const std::vector<uint32_t>& tensors,
                                         const LoadCallbacks& callbacks);
  // Load() and LoadSlices(): SELS into one fresh allocation (see the file
  // comment for the layout). REQUIRES mu_ held.
  StatusOr<LoadResult> LoadSelections(const Checkpoint& ckpt,
                                      const std::vector<TensorSelection>& sels,
                                      const LoadCallbacks& callbacks,
                                      Clock::time_point t0);
  // Plans and runs the reads of SELS into DSTS (host addresses, one per
  // selection, its bytes back to back). POPULATE: the destinations are
  // fresh memory of ours; fault them in ahead of the readers (Populator).
  Status Run(const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
             const std::vector<OpenedFile>& opened,
             const std::vector<uintptr_t>& dsts, const LoadCallbacks& callbacks,
             bool populate, LoadReport* report);
  Status Open(const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
              std::vector<OpenedFile>* opened, LoadReport* report);

  LoadOptions options_;
  std::unique_ptr<BouncePool> bounce_;
  std::shared_ptr<HostBufferCache> buffers_;  // Load()'s destinations
  // Workers per load: warm_threads_ when every file is buffered (the
  // page-cache copy is CPU-bound: one per core), cold_threads_ when any is
  // O_DIRECT (I/O-bound: more than cores, so the device keeps requests
  // queued while some workers copy out of the bounce buffer).
  int warm_threads_;
  int cold_threads_;
  ThreadPool pool_;
  FileWrapper wrap_;
  // Set by the first refused io_uring buffer registration of any load, so
  // later rings do not pay for trying again.
  std::shared_ptr<std::atomic<int>> registration_refused_ =
      std::make_shared<std::atomic<int>>(0);
  std::mutex mu_;  // one load at a time

 public:
  // CreateHostLoader's time (bounce pool, threads), until the first load's
  // report takes it (see LoadReport::setup_seconds). REQUIRES mu_ held.
  double TakeSetupSeconds() { return std::exchange(setup_seconds_, 0); }
  double setup_seconds_ = 0;
};

Status HostLoader::Open(const Checkpoint& ckpt,
                        const std::vector<TensorSelection>& sels,
                        std::vector<OpenedFile>* opened, LoadReport* report) {
  const auto t = Clock::now();
  uint64_t load_bytes = 0;
  for (const TensorSelection& sel : sels) load_bytes += sel.bytes;
  WL_ASSIGN_OR_RETURN(
      *opened,
      OpenCheckpointFiles(ckpt, options_, FilesNeeded(ckpt, TensorsOf(sels)),
                          &report->notes,
                          MemoryToRegister(bounce_->memory(), load_bytes,
                                           options_, registration_refused_)));
  WrapOpenedFiles(wrap_, opened);
  report->open_seconds = SecondsSince(t);
  return Status::OK();
}

Status HostLoader::Run(const Checkpoint& ckpt,
                       const std::vector<TensorSelection>& sels,
                       const std::vector<OpenedFile>& opened,
                       const std::vector<uintptr_t>& dsts,
                       const LoadCallbacks& callbacks, bool populate,
                       LoadReport* report) {
  const auto t = Clock::now();
  std::vector<PlanFile> plan_files(ckpt.files().size());
  std::vector<File*> files(ckpt.files().size(), nullptr);
  bool any_direct = false;
  for (size_t i = 0; i < opened.size(); ++i) {
    plan_files[i].size = ckpt.files()[i].size;
    if (opened[i].file) {
      files[i] = opened[i].file.get();
      plan_files[i].alignment = opened[i].file->alignment();
      // A remote object (no descriptor, its own reads) is latency-bound
      // like O_DIRECT: it gets the cold thread count too.
      const bool remote =
          files[i]->native_fd() < 0 && files[i]->backend_name() != "memory";
      any_direct = any_direct || plan_files[i].alignment > 1 || remote;
    }
  }
  PlanOptions popt;
  popt.chunk_bytes = options_.chunk_bytes;
  popt.direct_min_bytes = options_.direct_min_bytes;
  std::vector<Segment> segments;
  segments.reserve(sels.size());
  PlacementStats placement;
  for (size_t k = 0; k < sels.size(); ++k) {
    const uint64_t a = plan_files[sels[k].file].alignment;
    PlaceOptions po;
    po.granularity = a;
    // Strided chunks are bounce chunks: at most a staging slot.
    po.max_chunk_bytes = std::max<uint64_t>(a, popt.chunk_bytes / a * a);
    PlaceSelection(sels[k], dsts[k], static_cast<uint32_t>(k), po, &segments,
                   &placement);
  }
  const Plan plan = MakePlan(segments, plan_files, sels.size(), popt);

  ExecCallbacks cb;
  if (callbacks.on_ready) {
    cb.on_ready = [&](uint32_t k) {
      callbacks.on_ready(k, ckpt.tensors()[sels[k].tensor]);
    };
  }
  cb.on_progress = callbacks.on_progress;
  cb.tensor_name = [&](uint32_t k) {
    return ckpt.tensors()[sels[k].tensor].name;
  };
  cb.threads = any_direct ? cold_threads_ : warm_threads_;
  std::atomic<size_t> next_chunk{0};
  cb.next_chunk = &next_chunk;
  std::optional<Populator> populator;
  if (populate && !plan.chunks.empty()) populator.emplace(plan, &next_chunk);
  ExecStats stats;
  Status s = RunHostPlan(plan, files, pool_, *bounce_, cb, &stats);
  if (populator) {
    const int err = populator->Finish();
    if (err != 0) {
      report->notes.push_back(
          "destination not populated ahead of the reads: "
          "madvise(MADV_POPULATE_WRITE) refused (" +
          ErrnoName(err) + ")");
    }
  }
  AppendFileNotes(opened, &report->notes);
  if (s.ok()) s = CheckFilesUnchanged(ckpt, TensorsOf(sels), opened);
  report->transfer_seconds = SecondsSince(t);
  report->threads = stats.threads;
  report->bytes_read = plan.bytes_read;
  report->staging_bytes = bounce_->total_bytes();
  WL_RETURN_IF_ERROR(s);

  report->tensors = sels.size();
  report->bytes = plan.bytes_delivered;
  for (size_t i = 0; i < opened.size(); ++i) {
    report->files.push_back(opened[i].report);
  }
  for (const TensorSelection& sel : sels) {
    report->files[sel.file].bytes += sel.bytes;
  }
  if (std::string note = placement.Note(); !note.empty()) {
    report->notes.push_back(std::move(note));
  }
  if (stats.bounce_chunks > 0 && stats.direct_chunks == 0 &&
      plan.bytes_delivered > 0) {
    report->notes.push_back(
        "all reads went through the bounce buffer and were copied (" +
        std::to_string(stats.bounce_chunks) +
        (stats.bounce_chunks == 1 ? " chunk)" : " chunks)"));
  } else if (stats.bounce_chunks > 0) {
    // Says where the bytes landed, not which system call read them (either
    // kind may be O_DIRECT or buffered).
    report->notes.push_back(std::to_string(stats.direct_chunks) +
                            (stats.direct_chunks == 1 ? " read" : " reads") +
                            " landed straight in the destination, " +
                            std::to_string(stats.bounce_chunks) +
                            " went through the bounce buffer and " +
                            (stats.bounce_chunks == 1 ? "was" : "were") +
                            " copied");
  }
  return Status::OK();
}

StatusOr<LoadResult> HostLoader::LoadMappedTensors(
    const Checkpoint& ckpt, const std::vector<uint32_t>& tensors,
    const LoadCallbacks& callbacks) {
  WL_ASSIGN_OR_RETURN(LoadResult result, LoadMapped(ckpt, tensors));
  if (callbacks.on_ready) {
    for (size_t k = 0; k < tensors.size(); ++k) {
      callbacks.on_ready(k, ckpt.tensors()[tensors[k]]);
    }
  }
  if (callbacks.on_progress) {
    callbacks.on_progress(result.report.bytes, result.report.bytes);
  }
  return result;
}

StatusOr<LoadResult> HostLoader::Load(const Checkpoint& ckpt,
                                      std::span<const std::string> names,
                                      const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> tensors, ResolveNames(ckpt, names));
  if (options_.zero_copy) return LoadMappedTensors(ckpt, tensors, callbacks);
  return LoadSelections(ckpt, WholeTensors(ckpt, tensors), callbacks, t0);
}

StatusOr<LoadResult> HostLoader::LoadSlices(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests,
    const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<TensorSelection> sels,
                      ResolveRequests(ckpt, requests));
  // zero_copy maps whole tensors only; slices are copies.
  if (options_.zero_copy &&
      std::all_of(sels.begin(), sels.end(),
                  [](const TensorSelection& s) { return s.whole; })) {
    return LoadMappedTensors(ckpt, TensorsOf(sels), callbacks);
  }
  return LoadSelections(ckpt, sels, callbacks, t0);
}

StatusOr<LoadResult> HostLoader::LoadSelections(
    const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
    const LoadCallbacks& callbacks, Clock::time_point t0) {
  LoadResult result;
  LoadReport& report = result.report;
  report.device = Device::Cpu();
  report.setup_seconds = TakeSetupSeconds();
  std::vector<OpenedFile> opened;
  WL_RETURN_IF_ERROR(Open(ckpt, sels, &opened, &report));

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
  std::shared_ptr<void> memory = std::move(buffer.memory);
  std::vector<uintptr_t> dsts(sels.size());
  const uintptr_t base = reinterpret_cast<uintptr_t>(memory.get());
  for (size_t k = 0; k < sels.size(); ++k) dsts[k] = base + pos[k];
  report.alloc_seconds = SecondsSince(ta);

  WL_RETURN_IF_ERROR(
      Run(ckpt, sels, opened, dsts, callbacks, buffer.fresh, &report));

  result.tensors =
      MakeLoadedSelections(ckpt, sels, Device::Cpu(), dsts, memory);
  report.seconds = SecondsSince(t0) + report.setup_seconds;
  return result;
}

Status HostLoader::LoadInto(const Checkpoint& ckpt,
                            std::span<const Destination> dests,
                            LoadReport* report_out,
                            const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  LoadReport report;
  report.device = Device::Cpu();
  report.setup_seconds = TakeSetupSeconds();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> tensors,
                      ResolveDestinations(ckpt, dests));
  const std::vector<TensorSelection> sels = WholeTensors(ckpt, tensors);
  std::vector<OpenedFile> opened;
  WL_RETURN_IF_ERROR(Open(ckpt, sels, &opened, &report));
  std::vector<uintptr_t> dsts(tensors.size());
  for (size_t k = 0; k < dests.size(); ++k) {
    dsts[k] = reinterpret_cast<uintptr_t>(dests[k].data);
  }
  WL_RETURN_IF_ERROR(
      Run(ckpt, sels, opened, dsts, callbacks, /*populate=*/false, &report));
  report.seconds = SecondsSince(t0) + report.setup_seconds;
  if (report_out != nullptr) *report_out = std::move(report);
  return Status::OK();
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
  // threads = 0: see ThreadUse (and HostLoader::cold_threads_).
  const int warm = ThreadCount(options.threads, ThreadUse::kBufferedReads);
  const int cold = ThreadCount(options.threads, ThreadUse::kDirectReads);
  const auto t_setup = Clock::now();
  // Slots hold one chunk aligned up to 4096 (the planner never makes a
  // bounce chunk larger than chunk_bytes rounded down to the alignment).
  WL_ASSIGN_OR_RETURN(
      std::unique_ptr<BouncePool> bounce,
      BouncePool::Create(options.staging_bytes, options.chunk_bytes));
  std::unique_ptr<HostLoader> loader(
      new HostLoader(options, std::move(bounce), warm, cold, std::move(wrap)));
  WL_RETURN_IF_ERROR(loader->pool_status());
  loader->setup_seconds_ = SecondsSince(t_setup);
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace weightlift::internal
