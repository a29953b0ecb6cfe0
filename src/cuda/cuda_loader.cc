// The CUDA loader: wires the pieces of one load together. Three ways bytes
// reach device memory, chosen per file (path_choice.h):
//
//  pinned staging  storage -> pinned slot -> device (staging_pipeline.h)
//  host-register   zero-copy from the page cache (host_register_pipeline.h)
//  gds             cuFileRead straight into device memory (gds_path.h)
//
// Completion is event based: a tensor is "ready" (on_ready) once every copy
// that delivers its bytes has completed on the device (load_job.h). Load()
// makes one device allocation for the whole load (device_layout.h); each
// path's plan comes from transfer_plan.h, sizes from cuda_config.h.
// LoadInto() checks the caller's pointers (destination_check.h).
#include "cuda/cuda_loader.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/cuda_config.h"
#include "cuda/cuda_util.h"
#include "cuda/destination_check.h"
#include "cuda/device_layout.h"
#include "cuda/gds_path.h"
#include "cuda/host_register_pipeline.h"
#include "cuda/load_job.h"
#include "cuda/path_choice.h"
#include "cuda/staging_pipeline.h"
#include "cuda/transfer_plan.h"
#include "exec/open_files.h"
#include "exec/request.h"
#include "exec/thread_pool.h"
#include "util/clock.h"

namespace weightlift::internal {

bool CudaCompiledIn() { return true; }

namespace {

class CudaLoader final : public Loader {
 public:
  static StatusOr<std::unique_ptr<Loader>> Create(const LoadOptions& options,
                                                  CudaLoaderHooks hooks);
  ~CudaLoader() override;

  StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                            std::span<const std::string> names,
                            const LoadCallbacks& callbacks) override;
  StatusOr<LoadResult> LoadSlices(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  const LoadCallbacks& callbacks) override;
  Status LoadInto(const Checkpoint& ckpt, std::span<const Destination> dests,
                  LoadReport* report, const LoadCallbacks& callbacks) override;
  const LoadOptions& options() const override { return options_; }

 private:
  CudaLoader(const LoadOptions& o, CudaLoaderHooks hooks)
      : options_(o), hooks_(std::move(hooks)) {}
  Status Init();
  // Runs JOB (destinations already set) and fills REPORT.
  Status Run(Job& job, LoadReport* report);
  // Load() and LoadSlices(): one device allocation for SELS, then Run.
  // REQUIRES mu_ held.
  StatusOr<LoadResult> LoadSelections(const Checkpoint& ckpt,
                                      std::vector<TensorSelection> sels,
                                      const LoadCallbacks& callbacks,
                                      Clock::time_point t0);
  void FillReportHeader(LoadReport* r);
  // Memory the io_uring files of a load of LOAD_BYTES register for their
  // reads: the staging ring, for loads large enough to repay it.
  FixedBuffers RegisteredMemory(uint64_t load_bytes) const {
    return MemoryToRegister(
        staging_ ? staging_->ring() : std::span<std::byte>{}, load_bytes,
        options_, registration_refused_);
  }
  // Set by the first refused io_uring buffer registration of any load (a
  // kernel that cannot pin cudaHostAlloc memory, a memlock limit), so later
  // rings do not pay for trying again.
  std::shared_ptr<std::atomic<int>> registration_refused_ =
      std::make_shared<std::atomic<int>>(0);

  LoadOptions options_;
  CudaLoaderHooks hooks_;
  // Loader::Create's time (pinned staging, streams, events, threads), until
  // the first load's report takes it.
  double setup_seconds_ = 0;
  int device_ = 0;
  CudaLoaderConfig config_;
  HostRegisterSupport host_register_;
  std::optional<ThreadPool> pool_;
  std::optional<StagingPipeline> staging_;
  std::optional<HostRegisterPipeline> host_register_pipeline_;
  std::vector<cudaStream_t> streams_;
  std::mutex mu_;  // one load at a time
};

StatusOr<std::unique_ptr<Loader>> CudaLoader::Create(const LoadOptions& o,
                                                     CudaLoaderHooks hooks) {
  const auto t = Clock::now();
  std::unique_ptr<CudaLoader> l(new CudaLoader(o, std::move(hooks)));
  WL_RETURN_IF_ERROR(l->Init());
  l->setup_seconds_ = SecondsSince(t);
  return std::unique_ptr<Loader>(std::move(l));
}

Status CudaLoader::Init() {
  device_ = options_.device.index;
  WL_RETURN_IF_ERROR(CheckCudaDevice(device_));
  WL_RETURN_IF_ERROR(UseDevice(device_));
  WL_ASSIGN_OR_RETURN(
      config_,
      ResolveCudaConfig(options_, std::thread::hardware_concurrency()));

  // Can this device copy straight from a registered read-only file mapping?
  host_register_ = QueryHostRegisterSupport(device_);
  if (!host_register_.ok && options_.host_register == HostRegisterMode::kOn) {
    return Status::Unsupported("host_register=on: " + host_register_.why);
  }

  WL_ASSIGN_OR_RETURN(PinnedBuffer ring,
                      PinnedBuffer::Allocate(config_.ring_bytes()));
  streams_.assign(config_.streams, nullptr);
  for (auto& s : streams_) {
    WL_RETURN_IF_ERROR(CudaStatus(
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags on cuda:" + std::to_string(device_)));
  }
  WL_ASSIGN_OR_RETURN(CudaEvents slot_events,
                      CudaEvents::Create(static_cast<size_t>(config_.threads) *
                                         config_.slots_per_thread));
  WL_ASSIGN_OR_RETURN(CudaEvents piece_events,
                      CudaEvents::Create(2ull * config_.threads));
  staging_.emplace(std::move(ring), std::move(slot_events),
                   config_.slots_per_thread, config_.slot_bytes);
  host_register_pipeline_.emplace(std::move(piece_events));
  pool_.emplace(config_.threads);
  return pool_->status();
}

CudaLoader::~CudaLoader() {
  cudaSetDevice(device_);
  for (auto s : streams_) {
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
  // The pipelines (events, then the pinned ring) go with the members, after
  // every stream that could still use them is idle.
}

void CudaLoader::FillReportHeader(LoadReport* r) {
  // The first load pays for the loader's creation (see LoadReport).
  r->setup_seconds = setup_seconds_;
  setup_seconds_ = 0;
  r->device = options_.device;
  r->threads = config_.threads;
  r->staging_bytes = staging_ ? staging_->ring_bytes() : 0;
}

Status CudaLoader::Run(Job& job, LoadReport* report) {
  const Checkpoint& ckpt = *job.ckpt;
  auto t_open = Clock::now();
  std::vector<std::string>& notes = report->notes;
  notes.insert(notes.end(), config_.notes.begin(), config_.notes.end());
  std::vector<bool> needed = FilesNeeded(ckpt, job.tensors);
  WL_ASSIGN_OR_RETURN(std::vector<OpenedFile> opened,
                      OpenCheckpointFiles(ckpt, options_, needed, &notes,
                                          RegisteredMemory(job.total)));
  WrapOpenedFiles(hooks_.wrap_file, &opened);
  WL_ASSIGN_OR_RETURN(
      std::vector<FileChoice> files,
      ChoosePaths(ckpt, options_, needed, opened, host_register_, report));
  report->open_seconds = SecondsSince(t_open);

  TransferPlans plans = PlanTransfers(job, files, config_, report);

  // ---- Transfer: GDS, then host-register, then staging.
  auto t_xfer = Clock::now();
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    if (job.remaining[r].load(std::memory_order_relaxed) == 0) job.ReadyNow(r);
  }
  Status s = RunGds(job, plans.gds, plans.gds_files, config_.slot_bytes,
                    device_, *pool_);
  if (!s.ok()) job.Fail(s);
  if (!job.failed) {
    host_register_pipeline_->Run(job, plans.host_register,
                                 plans.host_register_files, streams_, device_,
                                 *pool_);
  }
  if (!job.failed) {
    staging_->Run(job, plans.staging, plans.staging_files, streams_, device_,
                  *pool_);
  }
  for (FileChoice& f : files) f.gds = GdsFile();  // deregister, close
  AppendFileNotes(opened, &notes);
  report->transfer_seconds = SecondsSince(t_xfer);
  if (job.failed) return job.first_error();
  WL_RETURN_IF_ERROR(CheckFilesUnchanged(ckpt, job.tensors, opened));
  job.progress.Finish();
  report->bytes = job.progress.delivered();
  return Status::OK();
}

StatusOr<LoadResult> CudaLoader::Load(const Checkpoint& ckpt,
                                      std::span<const std::string> names,
                                      const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> idx, ResolveNames(ckpt, names));
  return LoadSelections(ckpt, WholeTensors(ckpt, idx), callbacks, t0);
}

StatusOr<LoadResult> CudaLoader::LoadSlices(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests,
    const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<TensorSelection> sels,
                      ResolveRequests(ckpt, requests));
  return LoadSelections(ckpt, std::move(sels), callbacks, t0);
}

StatusOr<LoadResult> CudaLoader::LoadSelections(
    const Checkpoint& ckpt, std::vector<TensorSelection> sels,
    const LoadCallbacks& callbacks, Clock::time_point t0) {
  WL_RETURN_IF_ERROR(UseDevice(device_));
  LoadResult result;
  LoadReport& report = result.report;
  FillReportHeader(&report);

  // ---- One device allocation for the whole load, tensors 256-aligned.
  auto t_alloc = Clock::now();
  std::vector<uint64_t> sizes;
  sizes.reserve(sels.size());
  for (const TensorSelection& s : sels) sizes.push_back(s.bytes);
  WL_ASSIGN_OR_RETURN(DeviceLayout layout, LayOutOnDevice(sizes));
  WL_ASSIGN_OR_RETURN(std::shared_ptr<void> owner,
                      AllocateLayout(device_, layout));
  auto* base = static_cast<std::byte*>(owner.get());
  report.alloc_seconds = SecondsSince(t_alloc);
  report.device_bytes = layout.total;
  if (hooks_.after_alloc) hooks_.after_alloc(base, layout.total);

  std::vector<uintptr_t> dst(sels.size());
  for (size_t r = 0; r < sels.size(); ++r) {
    dst[r] = reinterpret_cast<uintptr_t>(base) + layout.offsets[r];
  }
  Job job(ckpt, std::move(sels), std::move(dst), callbacks,
          layout.tensor_bytes);
  Status s = Run(job, &report);
  if (!s.ok()) return s;  // OWNER frees the device memory here

  result.tensors = MakeLoadedSelections(ckpt, job.selections, options_.device,
                                        job.dst, owner);
  report.tensors = job.selections.size();
  report.seconds = SecondsSince(t0) + report.setup_seconds;
  return result;
}

Status CudaLoader::LoadInto(const Checkpoint& ckpt,
                            std::span<const Destination> dests,
                            LoadReport* report_out,
                            const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> idx,
                      ResolveDestinations(ckpt, dests));
  WL_RETURN_IF_ERROR(UseDevice(device_));
  WL_RETURN_IF_ERROR(CheckDeviceDestinations(dests, device_));
  LoadReport local;
  LoadReport& report = report_out ? *report_out : local;
  report = LoadReport{};
  FillReportHeader(&report);
  std::vector<uintptr_t> dst(idx.size());
  uint64_t total = 0;
  for (size_t r = 0; r < idx.size(); ++r) {
    dst[r] = reinterpret_cast<uintptr_t>(dests[r].data);
    total += dests[r].size;
  }
  Job job(ckpt, WholeTensors(ckpt, idx), std::move(dst), callbacks, total);
  WL_RETURN_IF_ERROR(Run(job, &report));
  report.tensors = idx.size();
  report.seconds = SecondsSince(t0) + report.setup_seconds;
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options) {
  return CreateCudaLoader(options, CudaLoaderHooks{});
}

StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options,
                                                   CudaLoaderHooks hooks) {
  if (!options.device.is_cuda()) {
    return Status::InvalidArgument(
        "CreateCudaLoader needs a cuda device, got " +
        options.device.ToString());
  }
  return CudaLoader::Create(options, std::move(hooks));
}

}  // namespace weightlift::internal
