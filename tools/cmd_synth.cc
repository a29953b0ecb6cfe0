// weightlift synth --layout L [--shards N] [--seed S] DIR: writes a synthetic
// checkpoint with the names, shapes and dtypes of a real model.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "format/synth.h"
#include "synth_cache.h"

namespace weightlift::cli {
namespace {

struct SynthArgs {
  std::string layout;
  int shards = 0;  // 0: as published
  uint64_t seed = 0;
  std::string dir;
};

int Run(const SynthArgs& args) {
  const int shards =
      args.shards > 0 ? args.shards : PublishedShards(args.layout);
  const auto start = std::chrono::steady_clock::now();
  Status s = SynthesizeChecked(args.layout, shards, args.dir, args.seed);
  if (!s.ok()) return ReportError(s);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(args.dir);
  if (!ckpt.ok()) return ReportError(ckpt.status());
  std::printf(
      "wrote %s (seed %llu) to %s in %.2f s: %zu file%s, %zu "
      "tensors, %s\n",
      args.layout.c_str(), static_cast<unsigned long long>(args.seed),
      args.dir.c_str(), secs, ckpt->files().size(),
      ckpt->files().size() == 1 ? "" : "s", ckpt->tensors().size(),
      FormatBytes(ckpt->total_bytes()).c_str());
  for (const FileInfo& f : ckpt->files()) {
    std::printf("  %s  %s\n", f.path.c_str(), FormatBytes(f.size).c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

Command AddSynth(CLI::App& parent) {
  auto args = std::make_shared<SynthArgs>();
  std::string layouts_help = "model layout:";
  std::vector<std::string> names;
  for (const internal::LayoutSummary& l : internal::ListLayouts()) {
    names.push_back(l.name);
    layouts_help += "\n  " + l.name + ": " + l.description + " (" +
                    FormatBytes(l.total_bytes) + ")";
  }
  CLI::App* app = parent.add_subcommand(
      "synth",
      "Write a synthetic checkpoint with the real tensor names, shapes and "
      "dtypes of a known model (deterministic data from the seed).");
  app->add_option("--layout", args->layout, layouts_help)
      ->required()
      ->check(CLI::IsMember(names));
  app->add_option("--shards", args->shards,
                  "number of shard files (default: as the published "
                  "checkpoint: llama2-7b 2, llama2-13b 3, llama3-8b 4, "
                  "tiny 1)")
      ->check(CLI::Range(1, 1000));
  app->add_option("--seed", args->seed, "data seed")->capture_default_str();
  app->add_option("DIR", args->dir, "output folder (created if needed)")
      ->required();
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
