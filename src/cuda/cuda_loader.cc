// The CUDA loader: the one Loader (exec/loader_core.h) over a CUDA device's
// LoadTarget. Three sinks deliver bytes to device memory, chosen per file
// (path_choice.h):
//
//  pinned staging  storage -> pinned slot -> device (staging_sink.h)
//  host-register   zero-copy from the page cache (host_register_sink.h)
//  gds             cuFileRead straight into device memory (gds_path.h)
//
// Completion is event based: a tensor is "ready" (on_ready) once every copy
// that delivers its bytes has completed on the device. Load() makes one
// device allocation for the whole load (device_layout.h); sizes come from
// cuda_config.h. LoadInto() checks the caller's pointers
// (destination_check.h).
#include "cuda/cuda_loader.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/cuda_config.h"
#include "cuda/cuda_util.h"
#include "cuda/destination_check.h"
#include "cuda/device_layout.h"
#include "cuda/gds_path.h"
#include "cuda/host_register_sink.h"
#include "cuda/path_choice.h"
#include "cuda/registered_pages.h"
#include "cuda/staging_sink.h"
#include "exec/load_target.h"
#include "exec/loader_core.h"
#include "exec/split_sink.h"
#include "exec/thread_pool.h"
#include "format/held_files.h"
#include "util/background_release.h"
#include "util/clock.h"

namespace weightlift::internal {

bool CudaCompiledIn() { return true; }

namespace {

class CudaTarget final : public LoadTarget {
 public:
  CudaTarget(const LoadOptions& o, std::function<void(void*, uint64_t)> after,
             StagingSink::PinHook before_pin)
      : options_(o),
        after_alloc_(std::move(after)),
        before_pin_(std::move(before_pin)) {}
  ~CudaTarget() override;
  // The device, its streams, the pinned ring, events and threads.
  Status Init();

  Device device() const override { return options_.device; }
  ThreadPool& pool() override { return *pool_; }
  std::span<std::byte> read_memory() const override { return staging_->ring(); }
  Status BeginLoad(LoadReport* report) override;
  Status CheckDestinations(std::span<const Destination> dests) override {
    return CheckDeviceDestinations(dests, device_);
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
  // The pages prepare registered for this load (registered_pages.h),
  // stopped; null when there are none for it. Pages made for another load
  // (another device, other selections) go back to the slot for that load;
  // a declined registration is said in REPORT's notes.
  std::shared_ptr<RegisteredPages> TakePreparedPages(
      const Checkpoint& ckpt, std::span<const TensorSelection> sels,
      LoadReport* report);
  // Marks in ROUTING the selections of SELS that lie in pages AHEAD
  // registered (their files staged, CHOICES[i].ahead), says per file how
  // many of its bytes were in place, and notes the registration.
  void MarkInPlace(std::span<const TensorSelection> sels,
                   const std::vector<FileChoice>& choices,
                   const RegisteredPages& ahead, Routing* routing,
                   LoadReport* report) const;

  const LoadOptions options_;
  std::function<void(void*, uint64_t)> after_alloc_;
  StagingSink::PinHook before_pin_;
  int device_ = 0;
  CudaLoaderConfig config_;
  HostRegisterSupport host_register_;
  std::vector<cudaStream_t> streams_;
  std::optional<ThreadPool> pool_;
  std::optional<StagingSink> staging_;
  std::optional<HostRegisterSink> host_register_sink_;
  // Staging with the selections in pages prepare registered copied
  // straight from them, in the same run.
  std::optional<SplitSink> staging_and_ahead_;
  std::optional<GdsSink> gds_;
  std::string setup_note_;  // Init's split, for the first load's report
  // Unregisters and unmaps the pages prepare registered, after the load
  // that used them (registered_pages.h). Declared last, so that it is
  // joined first, before the sinks and the ring go.
  BackgroundRelease release_;
};

// A load's routing state: its files' choices and the pages prepare
// registered for it, which go to the background release once the load's
// runs are done (unregistering gigabytes takes milliseconds per GB).
struct CudaRouteState {
  std::vector<FileChoice> choices;
  std::shared_ptr<RegisteredPages> ahead;
  BackgroundRelease* release = nullptr;
  ~CudaRouteState() {
    if (!ahead) return;
    try {
      release->Release(std::move(ahead));
    } catch (const std::bad_alloc&) {
      ahead.reset();  // unregistered here, then
    }
  }
};

// The largest copy out of pages registered ahead: 16 MiB copies ran at
// 54.9 GB/s against 55.5 for one copy of 2 GiB (and 4 MiB at 53.3) on the
// H200 (session 21); a 64 MiB cap keeps a rank's parts whole (they are 4-11
// MB at n = 8) and a whole load's tensors in few copies.
constexpr uint64_t kRegisteredChunkBytes = 64u << 20;

Status CudaTarget::Init() {
  const auto t_init = Clock::now();
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

  // The ring is reserved here, one part per wave (slot k of every worker),
  // and pinned wave by wave as the workers first write their slots (see
  // StagingSink): the pinning overlaps the caller's work before the first
  // load and the first load's reads instead of preceding them.
  const double t_device = SecondsSince(t_init);
  WL_ASSIGN_OR_RETURN(
      PinnedBuffer ring,
      PinnedBuffer::Reserve(config_.ring_bytes(), config_.slots_per_thread));
  const double t_ring = SecondsSince(t_init);
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
                   config_.slots_per_thread, config_.slot_bytes, streams_,
                   device_, before_pin_);
  host_register_sink_.emplace(std::move(piece_events), streams_, device_);
  staging_and_ahead_.emplace(*host_register_sink_, *staging_);
  gds_.emplace(device_);
  const double t_cuda = SecondsSince(t_init);
  // Each worker first-writes its slot of every wave as soon as its thread
  // starts, while the caller goes on (allocation, opening the files, the
  // plan); the last one to write a wave registers it.
  pool_.emplace(config_.threads, [this](int w) { staging_->PinEarly(w); });
  const double t_pool = SecondsSince(t_init);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "setup (loader creation) split: device checks %.2f ms, "
      "staging ring reserved (%.0f MiB, pinned later in waves) "
      "%.2f ms, %zu streams + %zu events %.2f ms, %d "
      "threads started %.2f ms",
      t_device * 1e3, static_cast<double>(config_.ring_bytes()) / (1 << 20),
      (t_ring - t_device) * 1e3, streams_.size(),
      static_cast<size_t>(config_.threads) * (config_.slots_per_thread + 2),
      (t_cuda - t_ring) * 1e3, config_.threads, (t_pool - t_cuda) * 1e3);
  setup_note_ = buf;
  return pool_->status();
}

CudaTarget::~CudaTarget() {
  // The workers first: one may still be pinning its part of the ring.
  pool_.reset();
  cudaSetDevice(device_);
  for (auto s : streams_) {
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
  // The sinks (events, then the pinned ring) go with the members, after
  // every stream that could still use them is idle.
}

Status CudaTarget::BeginLoad(LoadReport* r) {
  WL_RETURN_IF_ERROR(UseDevice(device_));
  r->threads = config_.threads;
  r->staging_bytes = staging_->ring_bytes();
  r->notes.insert(r->notes.end(), config_.notes.begin(), config_.notes.end());
  // The first load's report carries the setup it pays for (setup_seconds),
  // and its split; none when the loader's maker took the setup
  // (Loader::TakeSetupSeconds: made ahead, this load did not wait for it).
  if (!setup_note_.empty() && r->setup_seconds > 0) {
    r->notes.push_back(std::move(setup_note_));
  }
  setup_note_.clear();
  return Status::OK();
}

StatusOr<Allocation> CudaTarget::Allocate(const Checkpoint&,
                                          std::span<const TensorSelection> sels,
                                          const std::vector<OpenedFile>&,
                                          LoadReport* report) {
  // One device allocation for the whole load, tensors 256-aligned.
  const auto t = Clock::now();
  std::vector<uint64_t> sizes;
  sizes.reserve(sels.size());
  for (const TensorSelection& s : sels) sizes.push_back(s.bytes);
  WL_ASSIGN_OR_RETURN(DeviceLayout layout, LayOutOnDevice(sizes));
  Allocation a;
  WL_ASSIGN_OR_RETURN(a.owner, AllocateLayout(device_, layout));
  report->alloc_seconds = SecondsSince(t);
  report->device_bytes = layout.total;
  auto* base = static_cast<std::byte*>(a.owner.get());
  if (after_alloc_) after_alloc_(base, layout.total);
  a.dsts.resize(sels.size());
  for (size_t k = 0; k < sels.size(); ++k) {
    a.dsts[k] = reinterpret_cast<uintptr_t>(base) + layout.offsets[k];
  }
  return a;
}

std::shared_ptr<RegisteredPages> CudaTarget::TakePreparedPages(
    const Checkpoint& ckpt, std::span<const TensorSelection> sels,
    LoadReport* report) {
  PreparedPagesSlot& slot = HeldFiles::Prepared(ckpt);
  std::shared_ptr<PreparedPages> p = slot.Take();
  if (p == nullptr) return nullptr;
  auto pages = std::dynamic_pointer_cast<RegisteredPages>(p);
  if (pages == nullptr || pages->device() != device_ ||
      !pages->MadeFor(SelectionsDigest(sels))) {
    slot.Restore(std::move(p));  // for the load they were made for
    return nullptr;
  }
  if (!pages->declined().empty()) {
    report->notes.push_back("prepare registered no pages ahead of this load: " +
                            pages->declined());
    return nullptr;
  }
  pages->Stop();
  return pages;
}

StatusOr<Routing> CudaTarget::Route(const Checkpoint& ckpt,
                                    std::span<const TensorSelection> sels,
                                    const std::vector<bool>& needed,
                                    const std::vector<OpenedFile>& opened,
                                    LoadReport* report) {
  auto state = std::make_shared<CudaRouteState>();
  state->release = &release_;
  state->ahead = TakePreparedPages(ckpt, sels, report);
  std::vector<FileChoice>* choices = &state->choices;
  WL_ASSIGN_OR_RETURN(
      *choices, ChoosePaths(ckpt, options_, needed, opened, host_register_,
                            state->ahead.get(), report));
  Routing routing;
  routing.files.resize(ckpt.files().size());
  // Routes in the order they run: GDS, host-register, staging.
  constexpr int kGds = 0, kHostRegister = 1, kStaging = 2, kRoutes = 3;
  struct Route routes[kRoutes];
  routes[kGds].sink = &*gds_;
  routes[kGds].plan.chunk_bytes = config_.slot_bytes;  // one cuFileRead
  routes[kGds].plan.direct_min_bytes = 0;
  routes[kGds].strided = false;  // no staging to place a stride from
  routes[kHostRegister].sink = &*host_register_sink_;
  routes[kHostRegister].plan.chunk_bytes = config_.piece_bytes;
  routes[kHostRegister].plan.direct_min_bytes = UINT64_MAX;
  routes[kStaging].sink = &*staging_;
  // Every aligned read span within a slot, or less for a small load (one
  // slice) so that it spreads over every worker.
  routes[kStaging].plan.chunk_bytes = config_.slot_bytes;
  routes[kStaging].plan.direct_min_bytes = UINT64_MAX;
  routes[kStaging].spread_alignment = kPageBytes;
  int index[kRoutes] = {-1, -1, -1};
  std::vector<const GdsFile*> gds_files(choices->size(), nullptr);
  std::vector<const Mapping*> mappings(choices->size(), nullptr);
  std::vector<bool> registered_ahead(choices->size(), false);
  bool any_ahead = false;
  for (size_t i = 0; i < choices->size(); ++i) {
    const FileChoice& fc = (*choices)[i];
    FileRoute& fr = routing.files[i];
    fr.plan.size = ckpt.files()[i].size;
    fr.plan.allow_direct = false;
    if (!fc.needed) continue;
    int kind = kStaging;
    switch (fc.path) {
      case TransferPath::kStaging:
        fr.plan.alignment = fc.file->alignment();
        fr.granularity = fr.plan.alignment;
        // Its selections in pages prepare registered are copied straight
        // out of them by the host-register sink (MarkInPlace).
        mappings[i] = fc.ahead;
        registered_ahead[i] = fc.ahead != nullptr;
        any_ahead |= fc.ahead != nullptr;
        break;
      case TransferPath::kHostRegister:
        // Copies straight from the mapped file, registered piece by piece
        // during the load.
        kind = kHostRegister;
        fr.plan.alignment = kPageBytes;
        fr.granularity = kPageBytes;
        mappings[i] = &fc.mapping;
        break;
      case TransferPath::kGds:
        // cuFile takes any offset; slices' row runs are costed in pages.
        kind = kGds;
        fr.plan.alignment = 1;
        fr.plan.allow_direct = true;
        fr.granularity = kPageBytes;
        gds_files[i] = &fc.gds;
        break;
    }
    if (index[kind] < 0) index[kind] = -2;  // used; numbered below
    fr.file = fc.file;
    fr.route = kind;
    fr.report_index = fc.report_index;
  }
  if (any_ahead) {
    // Copies straight out of pages prepare registered: nothing is read, so
    // a strided placement moves only the selected bytes.
    routes[kStaging].sink = &*staging_and_ahead_;
    routes[kStaging].in_place_plan.chunk_bytes = kRegisteredChunkBytes;
    routes[kStaging].in_place_granularity = kPageBytes;
  }
  for (int kind = 0; kind < kRoutes; ++kind) {
    if (index[kind] == -1) continue;
    index[kind] = static_cast<int>(routing.routes.size());
    routing.routes.push_back(routes[kind]);
  }
  for (FileRoute& fr : routing.files) {
    if (fr.route >= 0) fr.route = index[fr.route];
  }
  gds_->UseFiles(std::move(gds_files));
  host_register_sink_->UseMappings(std::move(mappings),
                                   std::move(registered_ahead));
  if (state->ahead) {
    MarkInPlace(sels, *choices, *state->ahead, &routing, report);
  }
  // Deregistered, unmapped at the end (the pages prepare registered: in the
  // background).
  routing.state = std::move(state);
  return routing;
}

void CudaTarget::MarkInPlace(std::span<const TensorSelection> sels,
                             const std::vector<FileChoice>& choices,
                             const RegisteredPages& ahead, Routing* routing,
                             LoadReport* report) const {
  routing->in_place.assign(sels.size(), false);
  std::vector<uint64_t> in_place(choices.size(), 0),
      selected(choices.size(), 0);
  uint64_t in_place_total = 0, selected_total = 0;
  for (size_t k = 0; k < sels.size(); ++k) {
    const TensorSelection& sel = sels[k];
    const FileChoice& fc = choices[sel.file];
    selected[sel.file] += sel.bytes;
    selected_total += sel.bytes;
    if (sel.bytes == 0 || fc.ahead == nullptr) continue;
    // The sink copies from FC.ahead: the selection's mapping must be it.
    if (ahead.InPlace(sel) != fc.ahead) continue;
    routing->in_place[k] = true;
    in_place[sel.file] += sel.bytes;
    in_place_total += sel.bytes;
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    const FileChoice& fc = choices[i];
    if (fc.ahead == nullptr || fc.report_index < 0) continue;
    FileReport& fr = report->files[fc.report_index];
    if (in_place[i] == selected[i]) {
      fr.path_taken = "host-register";
    } else if (in_place[i] > 0) {
      fr.path_taken = "host-register+" + fr.path_taken;
    }
    char buf[120];
    std::snprintf(buf, sizeof buf,
                  "; %.1f of its %.1f MB selected copied in place%s",
                  static_cast<double>(in_place[i]) / 1e6,
                  static_cast<double>(selected[i]) / 1e6,
                  in_place[i] == selected[i] ? "" : ", the rest staged");
    fr.reason += buf;
  }
  char used[160];
  if (in_place_total == selected_total) {
    std::snprintf(used, sizeof used, "all %.2f GB of this load copied",
                  static_cast<double>(selected_total) / 1e9);
  } else if (in_place_total > 0) {
    std::snprintf(used, sizeof used,
                  "%.2f of its %.2f GB copied beside the staged rest",
                  static_cast<double>(in_place_total) / 1e9,
                  static_cast<double>(selected_total) / 1e9);
  } else {
    std::snprintf(used, sizeof used, "none of its %.2f GB copied (%s)",
                  static_cast<double>(selected_total) / 1e9,
                  options_.host_register == HostRegisterMode::kOff
                      ? "host_register=off"
                      : "no part lay in a registered span when it began");
  }
  char buf[360];
  std::snprintf(buf, sizeof buf,
                "prepare registered %.2f of %.2f GB of pages ahead of this "
                "load in %.1f ms; %s straight from them; unregistered in the "
                "background after the load",
                static_cast<double>(ahead.registered_bytes()) / 1e9,
                static_cast<double>(ahead.bytes()) / 1e9, ahead.seconds() * 1e3,
                used);
  std::string note = buf;
  if (!ahead.left_out().empty()) note += "; " + ahead.left_out();
  report->notes.push_back(std::move(note));
}

void CudaTarget::EndLoad(const ExecStats&, LoadReport* report) {
  // The ring's pinning runs inside the first load's transfer phase (see
  // Init): say what it cost, so the report accounts for it; and say in
  // every report when part of it could not be pinned.
  if (auto note = staging_->TakePinNote()) report->notes.push_back(*note);
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
  const auto t = Clock::now();
  auto target = std::make_unique<CudaTarget>(
      options, std::move(hooks.after_alloc), std::move(hooks.before_pin));
  WL_RETURN_IF_ERROR(target->Init());
  return MakeLoader(options, std::move(target), std::move(hooks.wrap_file),
                    SecondsSince(t));
}

}  // namespace weightlift::internal
