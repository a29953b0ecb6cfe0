// weightlift demo [--layout L] [--cache DIR]: generate a synthetic checkpoint
// with a real model's layout once, load it into the best device here, and
// compare with a naive loader on the same files in the same run. Without
// --layout it picks the largest layout that fits the machine: the disk it
// needs, and a peak RSS under a quarter of the machine's memory and under
// what is available now (demo_fit.h).
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_runner.h"
#include "cli_util.h"
#include "commands.h"
#include "cuda/device_available.h"
#include "demo_fit.h"
#include "format/synth.h"
#include "synth_cache.h"

namespace weightlift::cli {
namespace {

struct DemoArgs {
  std::string layout = "auto";
  std::string cache;
  std::string device;  // empty: best present
};

void PrintMode(const bench::BenchReport& r, bench::Mode mode,
               const char* title) {
  const bench::Measurement* loader = r.Find(bench::kLoader, mode);
  const bench::Measurement* naive = r.Find(bench::kNaiveMmap, mode);
  if (loader == nullptr) return;
  std::printf("\n%s\n", title);
  const double lsec = loader->seconds.empty() ? 0 : loader->seconds.back();
  std::printf("  weightlift   %8.3f s  %8.2f GB/s\n", lsec,
              loader->median_gbps());
  if (naive != nullptr) {
    const double nsec = naive->seconds.empty() ? 0 : naive->seconds.back();
    std::printf("  naive        %8.3f s  %8.2f GB/s   %s\n", nsec,
                naive->median_gbps(), naive->label.c_str());
    const double ratio = r.Ratio(bench::kNaiveMmap, mode);
    if (ratio > 0) {
      std::printf("  weightlift is %.2fx the naive loader\n", ratio);
    }
  }
  const LoadReport& lr =
      mode == bench::Mode::kCold ? r.cold_report : r.warm_report;
  for (const FileReport& f : lr.files) {
    std::printf("  %s: %s%s%s%s\n", Printable(f.path).c_str(),
                f.path_taken.c_str(), f.reason.empty() ? "" : " (",
                f.reason.c_str(), f.reason.empty() ? "" : ")");
  }
  for (const std::string& n : lr.notes) std::printf("  note: %s\n", n.c_str());
}

// Free bytes of the file system that holds DIR (or its nearest existing
// parent); 0 when unknown.
uint64_t FreeDiskBytes(std::string dir) {
  std::error_code ec;
  std::filesystem::path p(dir);
  while (!p.empty() && !std::filesystem::exists(p, ec)) p = p.parent_path();
  struct statvfs sv;
  if (::statvfs(p.empty() ? "." : p.c_str(), &sv) != 0) return 0;
  return static_cast<uint64_t>(sv.f_bavail) *
         static_cast<uint64_t>(sv.f_frsize);
}

// What the demo of one layout needs here.
struct LayoutNeeds {
  std::string layout;
  std::string dir;
  int shards = 1;
  uint64_t bytes = 0;      // tensor bytes, about the size on disk
  uint64_t peak_rss = 0;   // estimated peak RSS of the demo's process
  uint64_t disk_free = 0;  // on the cache's file system
  bool cached = false;     // generated earlier: needs no disk now
  bool fits_disk() const { return cached || disk_free >= bytes + (1u << 30); }
};

// The demo's peak RSS. A host load holds the loaded tensors while the naive
// loader holds its own copy: 4.44 GB for tinyllama-1.1b's 2.20 GB on the
// development VM (/usr/bin/time -v, README). A CUDA load holds no tensors in
// host memory; the naive loader's mapping of the files (counted as resident
// while mapped), the staging ring and the CUDA context bound it.
uint64_t EstimatedPeakRss(uint64_t bytes, bool cuda) {
  return cuda ? bytes + (768ull << 20) : 2 * bytes + (256ull << 20);
}

StatusOr<LayoutNeeds> Needs(const std::string& layout, const std::string& cache,
                            bool cuda) {
  LayoutNeeds n;
  n.layout = layout;
  n.dir = cache;
  if (n.dir.empty()) {
    WL_ASSIGN_OR_RETURN(n.dir, DefaultCacheDir(layout));
  }
  n.shards = PublishedShards(layout);
  for (const internal::LayoutSummary& l : internal::ListLayouts()) {
    if (l.name == layout) n.bytes = l.total_bytes;
  }
  n.peak_rss = EstimatedPeakRss(n.bytes, cuda);
  n.disk_free = FreeDiskBytes(n.dir);
  n.cached = SynthCached(layout, n.shards, /*seed=*/0, n.dir);
  return n;
}

std::string Describe(const LayoutNeeds& n) {
  return n.layout + ": " + FormatBytes(n.bytes) + " on disk (" +
         (n.cached ? "generated earlier"
                   : FormatBytes(n.disk_free) + " free there") +
         "), peak memory about " + FormatBytes(n.peak_rss);
}

int Run(const DemoArgs& args) {
  // 0. The device, then the layout that fits this machine.
  std::string device_text = args.device;
  std::string device_why;
  if (device_text.empty()) {
    std::string why;
    if (internal::CudaDeviceAvailable(0, &why)) {
      device_text = "cuda:0";
      device_why = "a CUDA device is present";
    } else {
      device_text = "cpu";
      device_why = "no CUDA device: " + why;
    }
  } else {
    device_why = "asked for with --device";
  }
  const bool cuda = device_text.rfind("cuda", 0) == 0;
  const MachineMemory memory = ReadMachineMemory();
  const uint64_t mem = memory.total;
  const uint64_t budget = DemoMemoryBudget(memory);
  std::vector<std::string> fit_notes;
  LayoutNeeds chosen;
  if (args.layout == "auto") {
    // Largest first; tiny (a few MB) fits anything.
    std::vector<LayoutNeeds> needs;
    std::vector<DemoCandidate> candidates;
    for (const char* layout : {"llama2-7b", "tinyllama-1.1b", "tiny"}) {
      StatusOr<LayoutNeeds> n = Needs(layout, args.cache, cuda);
      if (!n.ok()) return ReportError(n.status());
      candidates.push_back({n->layout, n->peak_rss, n->fits_disk()});
      needs.push_back(*std::move(n));
    }
    std::vector<std::string> passed_over;
    const size_t pick = PickDemoLayout(candidates, memory, &passed_over);
    chosen = needs[pick];
    for (size_t i = 0; i < passed_over.size(); ++i) {
      fit_notes.push_back("passed over " + Describe(needs[i]) + ": " +
                          passed_over[i]);
    }
  } else {
    StatusOr<LayoutNeeds> n = Needs(args.layout, args.cache, cuda);
    if (!n.ok()) return ReportError(n.status());
    chosen = *n;
    if (budget != 0 && chosen.peak_rss > budget) {
      fit_notes.push_back(
          chosen.layout + " needs about " + FormatBytes(chosen.peak_rss) +
          " of memory, over the demo's budget here (" + FormatBytes(budget) +
          ": a quarter of the memory, at most what is "
          "available now)");
    }
  }
  std::fprintf(stderr, "demo: %s\n", Describe(chosen).c_str());
  for (const std::string& n : fit_notes) {
    std::fprintf(stderr, "demo: %s\n", n.c_str());
  }

  // 1. The checkpoint, generated once.
  const std::string& dir = chosen.dir;
  const std::string& layout = chosen.layout;
  const int shards = chosen.shards;
  std::fprintf(stderr, "demo: checkpoint cache %s\n", dir.c_str());
  bool generated = false;
  const auto gen_start = std::chrono::steady_clock::now();
  if (::isatty(STDERR_FILENO)) {
    std::fprintf(stderr,
                 "demo: making sure %s is generated (first run "
                 "writes it once)...\n",
                 layout.c_str());
  }
  Status s = EnsureSynthCached(layout, shards, /*seed=*/0, dir, &generated);
  if (!s.ok()) return ReportError(s);
  const double gen_secs = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - gen_start)
                              .count();
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(dir);
  if (!ckpt.ok()) return ReportError(ckpt.status());

  // 2. The load options for the device chosen above.
  LoadFlags flags;
  flags.device = device_text;
  StatusOr<LoadOptions> options = MakeLoadOptions(flags);
  if (!options.ok()) return ReportError(options.status());

  // 3. Cold and warm, loader and the naive loader, same files, same run.
  bench::BenchOptions bo;
  bo.load = *options;
  bo.repeat = 1;
  bo.ceilings = false;
  bo.naive_pread = false;
  bo.into_touched = false;  // the demo compares Load() with a naive loader
  // Warm needs the page cache to hold the files while the loaded copy
  // (host loads) and the naive loader's copy live too.
  const uint64_t bytes = ckpt->total_bytes();
  const uint64_t warm_need =
      options->device.is_cuda() ? bytes + bytes / 4 : bytes * 2 + bytes / 4;
  std::vector<std::string> notes = fit_notes;
  if (mem != 0 && warm_need > mem) {
    bo.warm = false;
    notes.push_back("warm run skipped: " + FormatBytes(warm_need) +
                    " of memory needed, the machine has " + FormatBytes(mem));
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  ProgressBar bar("  loading");
  if (tty) {
    bo.on_step = [&bar](const std::string& step) {
      bar.Finish();
      std::fprintf(stderr, "\r\033[Kdemo: %s", step.c_str());
      std::fflush(stderr);
    };
  }
  bo.on_progress = [&bar](uint64_t done, uint64_t total) {
    bar.Update(done, total);
  };
  StatusOr<bench::BenchReport> r = bench::RunBench(dir, *ckpt, bo);
  bar.Finish();
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r.ok()) return ReportError(r.status());

  std::string description;
  for (const internal::LayoutSummary& l : internal::ListLayouts()) {
    if (l.name == layout) description = l.description;
  }
  std::printf("weightlift demo: %s\n", description.c_str());
  std::printf("  checkpoint  %s\n", dir.c_str());
  std::printf("              %zu tensors, %s in %zu file%s (%s)\n",
              ckpt->tensors().size(), FormatBytes(bytes).c_str(),
              ckpt->files().size(), ckpt->files().size() == 1 ? "" : "s",
              generated
                  ? ("generated now in " +
                     std::to_string(static_cast<int>(gen_secs + 0.5)) + " s")
                        .c_str()
                  : "generated earlier, reused");
  std::printf("  device      %s (%s)\n", device_text.c_str(),
              device_why.c_str());

  if (r->have_cold_report) {
    char title[160];
    std::snprintf(title, sizeof title,
                  "cold (page cache evicted first; %.0f%% still resident "
                  "after eviction):",
                  r->max_resident_after_evict * 100);
    PrintMode(*r, bench::Mode::kCold, title);
  }
  if (r->have_warm_report) {
    PrintMode(*r, bench::Mode::kWarm, "warm (files in the page cache):");
  }
  for (const std::string& n : r->notes) notes.push_back(n);
  std::printf(
      "\npeak RSS %s (estimated beforehand: %s; budget: %s, a quarter "
      "of this machine's memory and at most what was available).\n"
      "Ceilings and more baselines: weightlift "
      "bench %s --device %s\n",
      FormatBytes(r->peak_rss_end).c_str(),
      FormatBytes(chosen.peak_rss).c_str(), FormatBytes(budget).c_str(),
      dir.c_str(), device_text.c_str());
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

Command AddDemo(CLI::App& parent) {
  auto args = std::make_shared<DemoArgs>();
  std::vector<std::string> names = {"auto"};
  for (const internal::LayoutSummary& l : internal::ListLayouts()) {
    names.push_back(l.name);
  }
  CLI::App* app = parent.add_subcommand(
      "demo",
      "Generate a synthetic checkpoint with a real model's layout once into "
      "a cache folder, load it into the best device here (cuda:0 if "
      "present, else cpu) cold and warm, and compare with a naive loader "
      "(mmap + a copy per tensor) on the same files in the same run.");
  app->add_option("--layout", args->layout,
                  "model layout; auto: the largest of llama2-7b, "
                  "tinyllama-1.1b and tiny whose checkpoint fits the free "
                  "disk and whose demo stays under a quarter of the "
                  "machine's memory and under the memory available now")
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  app->add_option("--cache", args->cache,
                  "folder for the checkpoint (default "
                  "~/.cache/weightlift/synth/<layout>, or under "
                  "$XDG_CACHE_HOME)");
  app->add_option("--device", args->device,
                  "load into this device instead of the best one present");
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
