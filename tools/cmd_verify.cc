// weightlift verify PATH [--hash sha256] [--device D] [--backend B]:
// validates every header, then reads every tensor byte through the loader
// (so a truncated or unreadable file fails), optionally printing a
// sha256sum-style digest line per tensor.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "device_copy.h"
#include "sha256.h"
#include "weightlift/loader.h"

namespace weightlift::cli {
namespace {

// Tensors are loaded in batches of about this many bytes, so verifying a
// checkpoint larger than memory works and memory use stays bounded.
constexpr uint64_t kBatchBytes = 2ull << 30;
// Host bounce buffer for reading device tensors back.
constexpr size_t kReadbackBytes = 64u << 20;

struct VerifyArgs {
  std::string path;
  std::string hash;
  LoadFlags load;
};

// DEVICE: where the loader put the tensor (the load's device).
Status HashTensor(const LoadedTensor& t, const Device& device, Sha256& sha,
                  std::vector<unsigned char>& readback) {
  WL_RETURN_IF_ERROR(sha.Reset());
  if (t.size == 0) return Status::OK();
  if (!device.is_cuda()) return sha.Update(t.data, t.size);
  if (readback.empty()) readback.resize(kReadbackBytes);
  const auto* src = static_cast<const unsigned char*>(t.data);
  for (uint64_t done = 0; done < t.size;) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(readback.size(), t.size - done));
    Status s = CopyDeviceToHost(device, readback.data(), src + done, n);
    if (!s.ok()) return s.WithContext("tensor '" + t.name + "'");
    WL_RETURN_IF_ERROR(sha.Update(readback.data(), n));
    done += n;
  }
  return Status::OK();
}

int Run(const VerifyArgs& args) {
  StatusOr<LoadOptions> options = MakeLoadOptions(args.load);
  if (!options.ok()) return ReportError(options.status());
  std::unique_ptr<Sha256> sha;
  if (!args.hash.empty()) {
    StatusOr<std::unique_ptr<Sha256>> h = Sha256::Create();
    if (!h.ok()) return ReportError(h.status());
    sha = std::move(*h);
  }
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(args.path);
  if (!ckpt.ok()) return ReportError(ckpt.status());
  StatusOr<std::unique_ptr<Loader>> loader = Loader::Create(*options);
  if (!loader.ok()) return ReportError(loader.status());

  const auto start = std::chrono::steady_clock::now();
  const std::vector<TensorInfo>& all = ckpt->tensors();
  const uint64_t total = ckpt->total_bytes();
  uint64_t verified_bytes = 0;
  std::vector<unsigned char> readback;
  std::vector<std::string> paths_taken;  // per file, from the reports
  paths_taken.resize(ckpt->files().size());
  ProgressBar bar("verify");
  size_t i = 0;
  while (i < all.size()) {
    // Next batch: at least one tensor, then up to kBatchBytes.
    std::vector<std::string> names;
    std::vector<const TensorInfo*> infos;
    uint64_t batch_bytes = 0;
    while (i < all.size() &&
           (names.empty() || batch_bytes + all[i].size <= kBatchBytes)) {
      names.push_back(all[i].name);
      infos.push_back(&all[i]);
      batch_bytes += all[i].size;
      ++i;
    }
    LoadCallbacks callbacks;
    const uint64_t base = verified_bytes;
    callbacks.on_progress = [&bar, base, total](uint64_t done, uint64_t) {
      bar.Update(base + done, total);
    };
    StatusOr<LoadResult> result = (*loader)->Load(*ckpt, names, callbacks);
    if (!result.ok()) {
      bar.Finish();
      return ReportError(result.status());
    }
    if (result->tensors.size() != names.size()) {
      bar.Finish();
      return ReportError(Status::Internal(
          "loader returned " + std::to_string(result->tensors.size()) +
          " tensors for " + std::to_string(names.size()) + " requested"));
    }
    for (const FileReport& f : result->report.files) {
      for (size_t k = 0; k < ckpt->files().size(); ++k) {
        if (ckpt->files()[k].path == f.path && paths_taken[k].empty()) {
          paths_taken[k] = f.path_taken;
        }
      }
    }
    for (size_t k = 0; k < names.size(); ++k) {
      const LoadedTensor& t = result->tensors[k];
      if (t.name != infos[k]->name || t.size != infos[k]->size) {
        bar.Finish();
        return ReportError(Status::Internal(
            "loader returned tensor '" + t.name + "' (" +
            std::to_string(t.size) + " bytes) where '" + infos[k]->name +
            "' (" + std::to_string(infos[k]->size) + " bytes) was expected"));
      }
      if (sha) {
        Status s = HashTensor(t, options->device, *sha, readback);
        StatusOr<std::string> hex =
            s.ok() ? sha->FinishHex() : StatusOr<std::string>(s);
        if (!hex.ok()) {
          bar.Finish();
          return ReportError(hex.status());
        }
        bar.Finish();  // never interleave digest lines with the bar
        std::printf("%s\n", Sha256SumLine(*hex, t.name).c_str());
      }
    }
    std::fflush(stdout);
    verified_bytes += batch_bytes;
  }
  bar.Finish();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  // With --hash stdout holds only digest lines (sha256sum -c can read it),
  // so the summary goes to stderr.
  FILE* summary = sha ? stderr : stdout;
  std::fprintf(summary,
               "OK: %zu tensors, %s in %zu file%s verified on %s in %.3f s "
               "(%s)\n",
               all.size(), FormatBytes(total).c_str(), ckpt->files().size(),
               ckpt->files().size() == 1 ? "" : "s",
               options->device.ToString().c_str(), secs,
               FormatRate(total, secs).c_str());
  for (size_t k = 0; k < ckpt->files().size(); ++k) {
    std::fprintf(
        summary, "  %s: %s\n", Printable(ckpt->files()[k].path).c_str(),
        paths_taken[k].empty() ? "(no tensor data)" : paths_taken[k].c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

Command AddVerify(CLI::App& parent) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* app = parent.add_subcommand(
      "verify",
      "Validate every header and read every tensor byte through the loader. "
      "With --hash sha256, print one line per tensor as sha256sum does: the "
      "lowercase hex digest, two spaces, the tensor name.");
  app->add_option("PATH", args->path, "checkpoint file, index or directory")
      ->required();
  app->add_option("--hash", args->hash, "digest to print per tensor")
      ->check(CLI::IsMember({"sha256"}));
  app->add_option("--device", args->load.device,
                  "cpu or cuda:N (CUDA tensors are copied back to hash)")
      ->check(CheckedBy(Device::Parse))
      ->capture_default_str();
  app->add_option("--backend", args->load.backend,
                  "auto|pread|direct|uring|mmap")
      ->check(CheckedBy(ParseBackend))
      ->capture_default_str();
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
