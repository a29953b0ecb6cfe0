// weightlift bench PATH [--device D] [--repeat N] [--json]: the loader, cold
// and warm, against the storage ceiling, the naive loaders and (for CUDA)
// the pinned copy ceiling, all in one run (bench/bench_runner.h).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "bench_runner.h"
#include "cli_util.h"
#include "commands.h"
#include "object_bench.h"
#include "weightlift/object_storage.h"

namespace weightlift::cli {
namespace {

struct BenchArgs {
  std::string path;
  LoadFlags load;
  int repeat = 1;
  std::string mode = "both";
  bool json = false;
};

int Run(const BenchArgs& args) {
  StatusOr<LoadOptions> options = MakeLoadOptions(args.load);
  if (!options.ok()) return ReportError(options.status());
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(args.path);
  if (!ckpt.ok()) return ReportError(ckpt.status());

  bench::BenchOptions bo;
  bo.load = *options;
  bo.repeat = args.repeat;
  bo.cold = args.mode != "warm";
  bo.warm = args.mode != "cold";
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  ProgressBar bar("  loader");
  if (tty) {
    bo.on_step = [&bar](const std::string& step) {
      bar.Finish();
      std::fprintf(stderr, "\r\033[Kbench: %s", step.c_str());
      std::fflush(stderr);
    };
  }
  bo.on_progress = [&bar](uint64_t done, uint64_t total) {
    bar.Update(done, total);
  };
  StatusOr<bench::BenchReport> report =
      IsObjectStorageLocation(args.path)
          ? bench::RunObjectBench(args.path, *ckpt, bo)
          : bench::RunBench(args.path, *ckpt, bo);
  bar.Finish();
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!report.ok()) return ReportError(report.status());
  if (args.json) {
    std::printf("%s\n", report->ToJson().c_str());
  } else {
    std::printf("%s", report->ToTable().c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

Command AddBench(CLI::App& parent) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* app = parent.add_subcommand(
      "bench",
      "Measure the loader cold (pages evicted before every step) and warm "
      "against, in the same run: the storage ceiling (raw O_DIRECT "
      "deep-queue read), the page-cache ceiling, naive loaders (mmap + a copy "
      "per tensor as plain safetensors does; one thread of pread) and, for "
      "CUDA, the pinned host->device copy ceiling. Prints GB/s, ratios and "
      "the peak RSS.");
  app->add_option("PATH", args->path, "checkpoint file, index or directory")
      ->required();
  AddLoadFlags(app, &args->load);
  app->add_option("--repeat", args->repeat,
                  "passes over every measurement; the table shows medians")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app->add_option("--mode", args->mode, "cold|warm|both")
      ->check(CLI::IsMember({"cold", "warm", "both"}))
      ->capture_default_str();
  app->add_flag("--json", args->json, "print one JSON object");
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
