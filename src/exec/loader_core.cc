#include "exec/loader_core.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/completion.h"
#include "exec/executor.h"
#include "exec/mapped_load.h"
#include "exec/populator.h"
#include "exec/read_counts.h"
#include "exec/request.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "util/clock.h"
#include "util/errno_text.h"
#include "util/fork_epoch.h"
#include "util/phase_marks.h"

namespace weightlift::internal {
namespace {

// Where the load's time went, its phases adding up to its seconds (less
// any setup): a rank of 8 of Llama-2-7B loads in about 40 ms, of which
// the workers run about 37, and the rest was unaccounted for until session
// 24 split the steps before the routing too.
void AddPhasesNote(const PhaseMarks& marks, LoadReport* report) {
  report->notes.push_back(marks.Note("loader phases"));
}

class CoreLoader final : public Loader {
 public:
  CoreLoader(const LoadOptions& options, std::unique_ptr<LoadTarget> target,
             FileWrapper wrap, double setup_seconds)
      : options_(options),
        target_(std::move(target)),
        wrap_(std::move(wrap)),
        setup_seconds_(setup_seconds) {}

  StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                            std::span<const std::string> names,
                            const LoadCallbacks& callbacks) override;
  StatusOr<LoadResult> LoadSlices(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  const LoadCallbacks& callbacks) override;
  Status LoadInto(const Checkpoint& ckpt, std::span<const Destination> dests,
                  LoadReport* report, const LoadCallbacks& callbacks) override;
  Status LoadSlicesInto(const Checkpoint& ckpt,
                        std::span<const TensorRequest> requests,
                        std::span<const Destination> dests, LoadReport* report,
                        const LoadCallbacks& callbacks) override;
  const LoadOptions& options() const override { return options_; }
  double TakeSetupSeconds() override {
    if (made_.forked()) return 0;  // the lock may be the parent's (below)
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(setup_seconds_, 0);
  }

 private:
  // Zero-copy Load() of whole tensors on the host (options_.zero_copy).
  StatusOr<LoadResult> LoadMappedTensors(const Checkpoint& ckpt,
                                         const std::vector<uint32_t>& tensors,
                                         const LoadCallbacks& callbacks);
  // Load() and LoadSlices(): SELS into one allocation of the target's.
  // REQUIRES mu_ held.
  StatusOr<LoadResult> LoadSelections(const Checkpoint& ckpt,
                                      const std::vector<TensorSelection>& sels,
                                      const LoadCallbacks& callbacks,
                                      Clock::time_point t0);
  // LoadInto() and LoadSlicesInto(): SELS into the caller's DESTS (one per
  // selection, sizes checked). REQUIRES mu_ held.
  Status LoadSelectionsInto(const Checkpoint& ckpt,
                            const std::vector<TensorSelection>& sels,
                            std::span<const Destination> dests,
                            LoadReport* report_out,
                            const LoadCallbacks& callbacks,
                            Clock::time_point t0);
  // The report's header and the target's start. REQUIRES mu_ held.
  Status Begin(LoadReport* report);
  // BOUNCE_BYTES: how many of the load's bytes may pass through the
  // target's read memory (LoadTarget::BounceBytes).
  Status Open(const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
              uint64_t bounce_bytes, std::vector<OpenedFile>* opened,
              LoadReport* report);
  // Routes, places, plans and runs the reads of SELS into DSTS (one
  // address per selection, its bytes back to back). POPULATE: DSTS are
  // fresh host memory of ours (Populator). Ends its phases in MARKS.
  Status Run(const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
             const std::vector<OpenedFile>& opened,
             std::span<const uintptr_t> dsts, const LoadCallbacks& callbacks,
             bool populate, LoadReport* report, PhaseMarks* marks);

  const LoadOptions options_;
  std::unique_ptr<LoadTarget> target_;
  FileWrapper wrap_;
  // The target's creation, until the first load's report takes it.
  double setup_seconds_;
  // Set by the first refused io_uring buffer registration of any load, so
  // later rings do not pay for trying again.
  std::shared_ptr<std::atomic<int>> registration_refused_ =
      std::make_shared<std::atomic<int>>(0);
  std::mutex mu_;  // one load at a time
  MadeInProcess made_;
};

Status CoreLoader::Begin(LoadReport* report) {
  report->device = target_->device();
  report->setup_seconds = std::exchange(setup_seconds_, 0);
  return target_->BeginLoad(report);
}

Status CoreLoader::Open(const Checkpoint& ckpt,
                        const std::vector<TensorSelection>& sels,
                        uint64_t bounce_bytes, std::vector<OpenedFile>* opened,
                        LoadReport* report) {
  const auto t = Clock::now();
  std::vector<uint64_t> file_bytes(ckpt.files().size(), 0);
  for (const TensorSelection& sel : sels) file_bytes[sel.file] += sel.bytes;
  WL_ASSIGN_OR_RETURN(
      *opened,
      OpenCheckpointFiles(ckpt, options_, FilesNeeded(ckpt, TensorsOf(sels)),
                          &report->notes,
                          MemoryToRegister(target_->read_memory(), bounce_bytes,
                                           options_, registration_refused_),
                          file_bytes, &target_->pool()));
  WrapOpenedFiles(wrap_, opened);
  report->open_seconds = SecondsSince(t);
  return Status::OK();
}

Status CoreLoader::Run(const Checkpoint& ckpt,
                       const std::vector<TensorSelection>& sels,
                       const std::vector<OpenedFile>& opened,
                       std::span<const uintptr_t> dsts,
                       const LoadCallbacks& callbacks, bool populate,
                       LoadReport* report, PhaseMarks* marks) {
  const auto t_route = Clock::now();
  WL_ASSIGN_OR_RETURN(
      Routing routing,
      target_->Route(ckpt, sels, FilesNeeded(ckpt, TensorsOf(sels)), opened,
                     report));
  // ---- Place every selection for its file's route, then plan each route
  // (its in-place selections apart, merged in).
  const auto t = Clock::now();
  report->open_seconds += Seconds(t - t_route);
  marks->End("routing", t);
  const size_t num_routes = routing.routes.size();
  std::vector<std::vector<Segment>> segments(num_routes);
  std::vector<std::vector<Segment>> in_place_segments(num_routes);
  std::vector<Segment> placed;
  for (size_t k = 0; k < sels.size(); ++k) {
    const TensorSelection& sel = sels[k];
    // Zero-byte tensors touch no file (FilesNeeded skips them).
    if (sel.bytes == 0) continue;
    const FileRoute& fr = routing.files[sel.file];
    if (fr.route < 0 || static_cast<size_t>(fr.route) >= num_routes) {
      return Status::Internal("no route reads file " +
                              ckpt.files()[sel.file].path);
    }
    report->files[fr.report_index].bytes += sel.bytes;
    const Route& route = routing.routes[fr.route];
    const bool in_place = k < routing.in_place.size() && routing.in_place[k];
    if (in_place && route.in_place_plan.chunk_bytes == 0) {
      return Status::Internal("selection " + std::to_string(k) +
                              " is in place on a route that takes none");
    }
    PlaceOptions po;
    po.granularity = in_place ? route.in_place_granularity : fr.granularity;
    po.read_cost_bytes = fr.file->read_cost_bytes();
    po.covering_is_free = in_place;
    const uint64_t g = std::max<uint64_t>(po.granularity, 1);
    const uint64_t cap =
        in_place ? route.in_place_plan.chunk_bytes : route.plan.chunk_bytes;
    // A strided chunk is one slot (in place: one copy): the planner's cap.
    po.max_chunk_bytes =
        route.strided || in_place ? std::max<uint64_t>(g, cap / g * g) : 0;
    if (in_place) {
      PlaceSelection(sel, dsts[k], static_cast<uint32_t>(k), po,
                     &in_place_segments[fr.route], &report->counts);
    } else if (route.strided) {
      PlaceSelection(sel, dsts[k], static_cast<uint32_t>(k), po,
                     &segments[fr.route], &report->counts);
    } else {
      placed.clear();
      PlaceSelection(sel, dsts[k], static_cast<uint32_t>(k), po, &placed,
                     &report->counts);
      for (const Segment& s : placed) AppendRows(s, &segments[fr.route]);
    }
  }
  std::vector<Plan> plans(num_routes);
  std::vector<int> route_threads(num_routes);  // RunOptions::threads
  std::vector<std::vector<File*>> files(num_routes);
  uint64_t total = 0;
  for (size_t r = 0; r < num_routes; ++r) {
    std::vector<PlanFile> plan_files(routing.files.size());
    files[r].assign(routing.files.size(), nullptr);
    for (size_t i = 0; i < routing.files.size(); ++i) {
      plan_files[i] = routing.files[i].plan;
      if (routing.files[i].route == static_cast<int>(r)) {
        files[r][i] = routing.files[i].file;
      }
    }
    const struct Route& route = routing.routes[r];
    PlanOptions popt = route.plan;
    route_threads[r] = route.threads;
    if (route.spread_alignment > 0) {
      uint64_t bytes = 0;
      for (const Segment& s : segments[r]) bytes += s.bytes();
      for (const Segment& s : in_place_segments[r]) bytes += s.bytes();
      const int workers = route.threads > 0
                              ? std::min(route.threads, target_->pool().size())
                              : target_->pool().size();
      const Spread spread =
          SpreadFor(bytes, workers, popt.chunk_bytes, kMinChunkBytes,
                    route.spread_alignment, kMinWorkerBytes);
      popt.chunk_bytes = spread.chunk_bytes;
      route_threads[r] = spread.workers;
    }
    plans[r] = MakePlan(segments[r], plan_files, sels.size(), popt);
    if (!in_place_segments[r].empty()) {
      // In place, a chunk is a copy out of a mapping: in pages, never read.
      std::vector<PlanFile> mapped = plan_files;
      for (PlanFile& f : mapped) {
        f.alignment = route.in_place_granularity;
        f.allow_direct = false;
      }
      MergeInPlace(MakePlan(in_place_segments[r], mapped, sels.size(),
                            route.in_place_plan),
                   &plans[r]);
    }
    total += plans[r].bytes_delivered;
    report->bytes_read += plans[r].bytes_read;
  }

  // ---- Run: every route in turn, one tracker for the whole load.
  CompletionTracker done(
      sels.size(),
      callbacks.on_ready ? std::function<void(uint32_t)>([&](uint32_t k) {
        callbacks.on_ready(k, ckpt.tensors()[sels[k].tensor]);
      })
                         : nullptr,
      callbacks.on_progress, total);
  for (const Plan& p : plans) done.AddPieces(p);
  done.Start();
  ExecStats stats;
  stats.start = Clock::now();
  marks->End("placing and planning", stats.start);
  int populate_refused = 0;
  for (size_t r = 0; r < num_routes && !done.failed(); ++r) {
    RunOptions run;
    run.threads = route_threads[r];
    run.tensor_name = [&](uint32_t k) {
      return ckpt.tensors()[sels[k].tensor].name;
    };
    std::atomic<size_t> next_chunk{0};
    run.next_chunk = &next_chunk;
    run.cancel = callbacks.cancel;
    std::optional<Populator> populator;
    if (populate && !plans[r].chunks.empty()) {
      populator.emplace(plans[r], &next_chunk, Populator::DefaultThreads());
    }
    RunPlan(plans[r], files[r], *routing.routes[r].sink, target_->pool(), run,
            done, &stats);
    if (populator) {
      if (const int err = populator->Finish(); err != 0) populate_refused = err;
    }
  }
  marks->End("running");
  std::vector<int> report_index(routing.files.size(), -1);
  for (size_t i = 0; i < routing.files.size(); ++i) {
    report_index[i] = routing.files[i].report_index;
  }
  routing = Routing{};  // deregister, unmap: nothing of ours is in flight
  if (populate_refused != 0) {
    report->notes.push_back(
        "destination not populated ahead of the reads: "
        "madvise(MADV_POPULATE_WRITE) refused (" +
        ErrnoName(populate_refused) + ")");
  }
  AddFileOutcomes(opened, report_index, report);
  Status s = done.first_error();
  if (s.ok()) s = CheckFilesUnchanged(ckpt, TensorsOf(sels), opened);
  report->transfer_seconds = SecondsSince(t);
  WL_RETURN_IF_ERROR(s);

  marks->End("releasing the routes and checking the files");
  done.Finish();
  report->tensors = sels.size();
  report->bytes = done.delivered();
  target_->EndLoad(stats, report);
  if (std::string note = TimelineNote(stats); !note.empty()) {
    report->notes.push_back(std::move(note));
  }
  AppendCountedNotes(report);
  marks->End("ending the run");
  return Status::OK();
}

StatusOr<LoadResult> CoreLoader::LoadMappedTensors(
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

StatusOr<LoadResult> CoreLoader::Load(const Checkpoint& ckpt,
                                      std::span<const std::string> names,
                                      const LoadCallbacks& callbacks) {
  // Before the lock: a parent thread may have held it at the fork.
  WL_RETURN_IF_ERROR(
      made_.CheckNotForked("this loader", "make a new loader in this process"));
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> tensors, ResolveNames(ckpt, names));
  // zero_copy is a host option (Validate refuses it for cuda).
  if (options_.zero_copy) return LoadMappedTensors(ckpt, tensors, callbacks);
  return LoadSelections(ckpt, WholeTensors(ckpt, tensors), callbacks, t0);
}

StatusOr<LoadResult> CoreLoader::LoadSlices(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests,
    const LoadCallbacks& callbacks) {
  // Before the lock: a parent thread may have held it at the fork.
  WL_RETURN_IF_ERROR(
      made_.CheckNotForked("this loader", "make a new loader in this process"));
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

StatusOr<LoadResult> CoreLoader::LoadSelections(
    const Checkpoint& ckpt, const std::vector<TensorSelection>& sels,
    const LoadCallbacks& callbacks, Clock::time_point t0) {
  LoadResult result;
  LoadReport& report = result.report;
  PhaseMarks marks(t0);
  marks.End("resolving the request");
  WL_RETURN_IF_ERROR(Begin(&report));
  marks.End("beginning");
  // The request's resolution counts as opening, so the phases add up.
  const double checked = SecondsSince(t0);
  std::vector<OpenedFile> opened;
  WL_RETURN_IF_ERROR(
      Open(ckpt, sels, target_->BounceBytes(sels), &opened, &report));
  marks.End("opening the files");
  report.open_seconds += checked;
  WL_ASSIGN_OR_RETURN(Allocation alloc,
                      target_->Allocate(ckpt, sels, opened, &report));
  marks.End("allocating");
  // ALLOC.owner frees the destination if the run fails.
  WL_RETURN_IF_ERROR(Run(ckpt, sels, opened, alloc.dsts, callbacks,
                         alloc.fresh_host, &report, &marks));
  result.tensors = MakeLoadedSelections(ckpt, sels, target_->device(),
                                        alloc.dsts, alloc.owner);
  const auto t_end = Clock::now();
  marks.End("handing out the tensors", t_end);
  report.seconds = Seconds(t_end - t0) + report.setup_seconds;
  AddPhasesNote(marks, &report);
  return result;
}

Status CoreLoader::LoadInto(const Checkpoint& ckpt,
                            std::span<const Destination> dests,
                            LoadReport* report_out,
                            const LoadCallbacks& callbacks) {
  // Before the lock: a parent thread may have held it at the fork.
  WL_RETURN_IF_ERROR(
      made_.CheckNotForked("this loader", "make a new loader in this process"));
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> tensors,
                      ResolveDestinations(ckpt, dests));
  return LoadSelectionsInto(ckpt, WholeTensors(ckpt, tensors), dests,
                            report_out, callbacks, t0);
}

Status CoreLoader::LoadSlicesInto(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  std::span<const Destination> dests,
                                  LoadReport* report_out,
                                  const LoadCallbacks& callbacks) {
  // Before the lock: a parent thread may have held it at the fork.
  WL_RETURN_IF_ERROR(
      made_.CheckNotForked("this loader", "make a new loader in this process"));
  std::lock_guard<std::mutex> lock(mu_);
  const auto t0 = Clock::now();
  if (dests.size() != requests.size()) {
    return Status::InvalidArgument(
        "LoadSlicesInto: " + std::to_string(requests.size()) +
        " requests but " + std::to_string(dests.size()) + " destinations");
  }
  WL_ASSIGN_OR_RETURN(std::vector<TensorSelection> sels,
                      ResolveRequests(ckpt, requests));
  for (size_t k = 0; k < sels.size(); ++k) {
    if (dests[k].size != sels[k].bytes) {
      return Status::InvalidArgument(
          "destination " + std::to_string(k) + " for tensor '" +
          requests[k].name + "' has " + std::to_string(dests[k].size) +
          " bytes but its selection has " + std::to_string(sels[k].bytes));
    }
    if (dests[k].data == nullptr && dests[k].size != 0) {
      return Status::InvalidArgument("destination " + std::to_string(k) +
                                     " for tensor '" + requests[k].name +
                                     "' is a null pointer (" +
                                     std::to_string(dests[k].size) + " bytes)");
    }
  }
  return LoadSelectionsInto(ckpt, sels, dests, report_out, callbacks, t0);
}

Status CoreLoader::LoadSelectionsInto(const Checkpoint& ckpt,
                                      const std::vector<TensorSelection>& sels,
                                      std::span<const Destination> dests,
                                      LoadReport* report_out,
                                      const LoadCallbacks& callbacks,
                                      Clock::time_point t0) {
  LoadReport report;
  PhaseMarks marks(t0);
  marks.End("resolving the request");
  WL_RETURN_IF_ERROR(Begin(&report));
  marks.End("beginning");
  WL_RETURN_IF_ERROR(target_->CheckDestinations(dests));
  marks.End("checking the destinations");
  // Resolving the request and checking the destinations count as opening,
  // so the phases add up to the load's seconds. The check can wait on the
  // driver: a staging ring registering its first waves holds every
  // pointer query of the process until it returns (1-3 ms seen in session
  // 14's first calls).
  const double checked = SecondsSince(t0);
  std::vector<OpenedFile> opened;
  // The caller's memory: any byte may need the bounce memory.
  uint64_t load_bytes = 0;
  for (const TensorSelection& sel : sels) load_bytes += sel.bytes;
  WL_RETURN_IF_ERROR(Open(ckpt, sels, load_bytes, &opened, &report));
  marks.End("opening the files");
  report.open_seconds += checked;
  std::vector<uintptr_t> dsts(dests.size());
  std::vector<uint64_t> sizes(dests.size());
  for (size_t k = 0; k < dests.size(); ++k) {
    dsts[k] = reinterpret_cast<uintptr_t>(dests[k].data);
    sizes[k] = dests[k].size;
  }
  // The caller's host memory, when fresh, is faulted in ahead of the
  // readers as the loader's own is (a group load's buffers, a tensor just
  // made by torch.empty): on the development VM a group of one, whose
  // buffers are fresh, took 1.9x the plain load's time with one reading
  // thread (bench/results/2026-12-05-devbox-group-stream).
  const bool populate =
      !target_->device().is_cuda() && MostlyFresh(dsts, sizes);
  WL_RETURN_IF_ERROR(
      Run(ckpt, sels, opened, dsts, callbacks, populate, &report, &marks));
  report.seconds = SecondsSince(t0) + report.setup_seconds;
  AddPhasesNote(marks, &report);
  if (report_out != nullptr) *report_out = std::move(report);
  return Status::OK();
}

}  // namespace

std::unique_ptr<Loader> MakeLoader(const LoadOptions& options,
                                   std::unique_ptr<LoadTarget> target,
                                   FileWrapper wrap, double setup_seconds) {
  return std::make_unique<CoreLoader>(options, std::move(target),
                                      std::move(wrap), setup_seconds);
}

}  // namespace weightlift::internal
