// weightlift load PATH --device D [...]: one timed load, then the report:
// bytes, seconds, GB/s, and which path served each file and why; one
// rank's parts (--tp-*), or one rank of a group that shares the reading
// (--group nccl, group_flags.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "baselines.h"
#include "cli_util.h"
#include "commands.h"
#include "group_flags.h"
#include "tp_flags.h"
#include "weightlift/group.h"
#include "weightlift/loader.h"

namespace weightlift::cli {
namespace {

struct LoadArgs {
  std::string path;
  LoadFlags load;
  bool cold = false;
  bool json = false;
  TpFlags tp;        // --tp-size / --tp-rank / --tp-plan: one rank's parts
  GroupFlags group;  // --group nccl ...: the ranks share the reading
};

// Group mode: the place (its device set on OPTIONS) and, with --tp-*, the
// rank's TP request (--tp-size / --tp-rank default to the group's), all
// checked before any file or GPU, so that a bad flag or plan on one rank
// fails it alone, at once, instead of leaving the others to their timeout.
struct GroupSetup {
  GroupPlace place;
  GroupLoadRequest request;
};
StatusOr<GroupSetup> SetUpGroup(const LoadArgs& args, LoadOptions* options) {
  GroupSetup setup;
  WL_ASSIGN_OR_RETURN(setup.place, ResolveGroup(args.group, args.load.device));
  options->device = setup.place.device;
  if (args.tp.requested()) {
    TpFlags tp = args.tp;
    if (tp.size == TpFlags::kNotGiven) tp.size = setup.place.size;
    if (tp.rank == TpFlags::kNotGiven) tp.rank = setup.place.rank;
    WL_ASSIGN_OR_RETURN(setup.request.tp, MakeTensorParallel(tp));
    setup.request.tensor_parallel = true;
  }
  return setup;
}

StatusOr<LoadResult> LoadInGroup(const LoadArgs& args, const GroupSetup& setup,
                                 Loader& loader, const Checkpoint& ckpt,
                                 const LoadCallbacks& callbacks) {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<GroupTransport> group,
                      JoinGroup(args.group, setup.place));
  return LoadWithGroup(loader, ckpt, *group, setup.request, callbacks);
}

int Run(const LoadArgs& args) {
  StatusOr<LoadOptions> options = MakeLoadOptions(args.load);
  if (!options.ok()) return ReportError(options.status());
  if (!args.group.requested() && args.group.any_given()) {
    return ReportError(Status::InvalidArgument(
        "--nccl-id, --group-rank, --group-size and --group-timeout go with "
        "--group nccl"));
  }
  std::optional<GroupSetup> group;
  if (args.group.requested()) {
    StatusOr<GroupSetup> setup = SetUpGroup(args, &*options);
    if (!setup.ok()) return ReportError(setup.status());
    group = std::move(*setup);
  }
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(args.path);
  if (!ckpt.ok()) return ReportError(ckpt.status());
  std::string tp_summary;
  std::vector<TensorRequest> tp_requests;
  if (args.tp.requested() && !args.group.requested()) {  // this rank's parts
    StatusOr<TensorParallel> tp = MakeTensorParallel(args.tp);
    if (!tp.ok()) return ReportError(tp.status());
    StatusOr<std::vector<TensorRequest>> reqs =
        TpRequests(*ckpt, *tp, &tp_summary);
    if (!reqs.ok()) return ReportError(reqs.status());
    tp_requests = std::move(*reqs);
  }
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(*options);
  if (!loader.ok()) return ReportError(loader.status());

  double resident_after_evict = -1;
  if (args.cold) {
    StatusOr<double> r = bench::EvictCheckpoint(*ckpt);
    if (!r.ok()) return ReportError(r.status());
    resident_after_evict = *r;
  }

  ProgressBar bar("load");
  LoadCallbacks callbacks;
  callbacks.on_progress = [&bar](uint64_t done, uint64_t total) {
    bar.Update(done, total);
  };
  StatusOr<LoadResult> result =
      group ? LoadInGroup(args, *group, **loader, *ckpt, callbacks)
      : args.tp.requested()
          ? (*loader)->LoadSlices(*ckpt, tp_requests, callbacks)
          : (*loader)->Load(*ckpt, {}, callbacks);
  bar.Finish();
  if (!result.ok()) return ReportError(result.status());
  const LoadReport& report = result->report;

  if (args.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::parse(
        report.ToJson(), nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded() || !out.is_object()) {
      std::printf("%s\n", report.ToJson().c_str());
    } else {
      out["cold"] = args.cold;
      if (args.tp.requested() && !args.group.requested()) {
        out["tp_rank"] = args.tp.rank;
        out["tp_size"] = args.tp.size;
        out["tp"] = tp_summary;
      }
      if (group) {
        out["group_rank"] = group->place.rank;
        out["group_size"] = group->place.size;
        out["tensor_parallel"] = group->request.tensor_parallel;
      }
      if (args.cold) out["resident_after_evict"] = resident_after_evict;
      out["peak_rss_bytes"] = PeakRssBytes();
      std::printf("%s\n",
                  out.dump(2, ' ', false,
                           nlohmann::ordered_json::error_handler_t::replace)
                      .c_str());
    }
  } else {
    if (!tp_summary.empty()) std::printf("%s\n", tp_summary.c_str());
    const std::string text = report.ToString();
    std::printf("%s", text.c_str());
    if (!text.empty() && text.back() != '\n') std::printf("\n");
    if (args.cold) {
      std::printf(
          "cold: pages evicted first; %.1f%% still resident after "
          "eviction%s\n",
          resident_after_evict * 100,
          resident_after_evict > 0.1
              ? " (the file system kept them: not a cold read)"
              : "");
    }
    std::printf("peak RSS: %s\n", FormatBytes(PeakRssBytes()).c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

void AddLoadFlags(CLI::App* app, LoadFlags* flags) {
  // Values are checked while parsing, so a bad one is a usage error (2)
  // with CLI11's message naming the flag.
  app->add_option("--device", flags->device, "cpu, cuda or cuda:N")
      ->check(CheckedBy(Device::Parse))
      ->capture_default_str();
  app->add_option("--backend", flags->backend,
                  "how bytes leave storage: auto|pread|direct|uring|mmap")
      ->check(CheckedBy(ParseBackend))
      ->capture_default_str();
  app->add_option("--gds", flags->gds,
                  "GPUDirect Storage for CUDA devices: auto|on|off|compat "
                  "(compat: cuFile's compatibility mode, for tests)")
      ->check(CheckedBy(ParseGdsMode))
      ->capture_default_str();
  app->add_option("--threads", flags->threads,
                  "I/O threads (0: automatic, by the kind of reads)")
      ->capture_default_str();
  app->add_option("--chunk", flags->chunk,
                  "bytes per read request and, for CUDA, per staging slot, "
                  "e.g. 8M, 8MiB, 1G, 4194304 (default 8M on the host, 4M "
                  "staging slots for CUDA)")
      ->check(CheckedBy(ParseByteSize));
  app->add_option("--staging", flags->staging,
                  "bounce / pinned staging memory in total (default 128M)")
      ->check(CheckedBy(ParseByteSize));
  app->footer(kSizeHelp);
}

Command AddLoad(CLI::App& parent) {
  auto args = std::make_shared<LoadArgs>();
  CLI::App* app = parent.add_subcommand(
      "load",
      "Load every tensor once and report bytes, seconds, GB/s, and which "
      "path served each file and why.");
  app->add_option("PATH", args->path, "checkpoint file, index or directory")
      ->required();
  AddLoadFlags(app, &args->load);
  app->add_flag("--cold", args->cold,
                "evict the files' pages from the page cache first "
                "(posix_fadvise DONTNEED)");
  app->add_flag("--json", args->json, "print the report as one JSON object");
  AddTpFlags(app, &args->tp);
  AddGroupFlags(app, &args->group);
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
