#include "cli_util.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "weightlift/object_storage.h"

namespace weightlift::cli {

const char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0  success\n"
    "  1  other failure (CUDA error, out of memory, internal error)\n"
    "  2  usage error (unknown flag, bad or missing argument)\n"
    "  3  format error: the checkpoint breaks the safetensors format\n"
    "  4  I/O error: a system call failed or a file came back short\n"
    "  5  unsupported: backend or feature not available in this build or "
    "on this machine\n"
    "  6  not found: file, directory, shard or tensor does not exist\n";

const char kSizeHelp[] =
    "SIZE is bytes (4194304) or a number with a unit: K, M, G, T and KiB, "
    "MiB, GiB, TiB are powers of 1024 (8M = 8MiB = 8388608); KB, MB, GB, TB "
    "are powers of 1000 (8MB = 8000000). Sizes print in binary units (MiB, "
    "GiB), throughput in GB/s (10^9 bytes per second).";

int ExitCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
      return kExitUsage;
    case StatusCode::kCorruption:
      return kExitFormat;
    case StatusCode::kIoError:
      return kExitIo;
    case StatusCode::kUnsupported:
      return kExitUnsupported;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kResourceExhausted:
    case StatusCode::kCudaError:
    case StatusCode::kCancelled:
    case StatusCode::kInternal:
      return kExitOther;
  }
  return kExitOther;
}

int ReportError(const Status& status) {
  // Messages quote names from the checkpoint (tensor and shard names): their
  // control bytes are escaped so the error stays one line and cannot drive
  // the terminal.
  std::fprintf(stderr, "weightlift: error: %s\n",
               Printable(status.ToString()).c_str());
  std::fflush(stderr);
  return ExitCodeFor(status.code());
}

StatusOr<Checkpoint> OpenCheckpoint(const std::string& path) {
  if (IsObjectStorageLocation(path)) {
    // s3:// and http(s)://: credentials and limits from the environment
    // (docs/object-storage.md).
    WL_RETURN_IF_ERROR(ConfigureObjectStorageFromEnvironment());
    return Checkpoint::Open(path);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return Status::NotFound(path + ": no such file or directory");
    }
    return Status::IoErrorFromErrno(path + ": cannot stat", err);
  }
  return Checkpoint::Open(path);
}

StatusOr<LoadOptions> MakeLoadOptions(const LoadFlags& flags) {
  LoadOptions options;
  WL_RETURN_IF_ERROR(SetLoadOption(options, "device", flags.device));
  WL_RETURN_IF_ERROR(SetLoadOption(options, "backend", flags.backend));
  WL_RETURN_IF_ERROR(SetLoadOption(options, "gds", flags.gds));
  WL_RETURN_IF_ERROR(
      SetLoadOption(options, "threads", std::to_string(flags.threads)));
  if (!flags.chunk.empty()) {
    WL_RETURN_IF_ERROR(SetLoadOption(options, "chunk", flags.chunk));
  }
  if (!flags.staging.empty()) {
    WL_RETURN_IF_ERROR(SetLoadOption(options, "staging", flags.staging));
  }
  WL_RETURN_IF_ERROR(options.Validate());
  return options;
}

std::string FormatBytes(uint64_t bytes) { return FormatByteSize(bytes); }

std::string FormatRate(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GB/s",
                static_cast<double>(bytes) / seconds / 1e9);
  return buf;
}

std::string FormatShape(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

uint64_t PeakRssBytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
}

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  using namespace std::chrono;
  const auto now = steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  // Long loads only: nothing for the first half second, then 10 Hz.
  if (now - start_ < milliseconds(500)) return;
  if (drawn_ && now - last_draw_ < milliseconds(100) && done < total) return;
  last_draw_ = now;
  const double fraction =
      std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, ' ');
  const double secs = duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\033[K%s [%s] %3d%%  %s / %s  %s", label_.c_str(),
               bar.c_str(), static_cast<int>(fraction * 100),
               FormatBytes(done).c_str(), FormatBytes(total).c_str(),
               FormatRate(done, secs).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
  enabled_ = false;
}

}  // namespace weightlift::cli
