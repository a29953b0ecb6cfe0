#include "cli_util.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

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
  std::fprintf(stderr, "weightlift: error: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  return ExitCodeFor(status.code());
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "': " + why +
                                   " (use bytes or a unit: 8M, 8MiB, 1G)");
  };
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return bad("too large");
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return bad("no number");
  std::string unit;
  for (char c : text.substr(i)) {
    unit.push_back(
        static_cast<char>((c >= 'a' && c <= 'z') ? c - 'a' + 'A' : c));
  }
  uint64_t multiplier = 1;
  if (!unit.empty() && unit != "B") {
    const char prefix = unit[0];
    const std::string rest = unit.substr(1);
    int power = 0;
    switch (prefix) {
      case 'K':
        power = 1;
        break;
      case 'M':
        power = 2;
        break;
      case 'G':
        power = 3;
        break;
      case 'T':
        power = 4;
        break;
      default:
        return bad("unknown unit");
    }
    uint64_t base;
    if (rest.empty() || rest == "I" || rest == "IB") {
      base = 1024;
    } else if (rest == "B") {
      base = 1000;
    } else {
      return bad("unknown unit");
    }
    for (int p = 0; p < power; ++p) multiplier *= base;
  }
  if (value != 0 && multiplier > std::numeric_limits<uint64_t>::max() / value) {
    return bad("too large");
  }
  value *= multiplier;
  if (value == 0) return bad("must be greater than zero");
  return value;
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
  WL_ASSIGN_OR_RETURN(options.device, Device::Parse(flags.device));
  WL_ASSIGN_OR_RETURN(options.backend, ParseBackend(flags.backend));
  WL_ASSIGN_OR_RETURN(options.gds, ParseGdsMode(flags.gds));
  if (flags.threads < 0) {
    return Status::InvalidArgument(
        "--threads must be >= 0 (0 = automatic), "
        "got " +
        std::to_string(flags.threads));
  }
  options.threads = flags.threads;
  if (!flags.chunk.empty()) {
    WL_ASSIGN_OR_RETURN(uint64_t chunk, ParseSize(flags.chunk));
    options.chunk_bytes = static_cast<size_t>(chunk);
    // The CUDA staging ring has its own slot size (tuned smaller than the
    // host read size); an explicit --chunk means both.
    if (options.device.is_cuda()) {
      options.cuda_chunk_bytes = static_cast<size_t>(chunk);
    }
  }
  if (!flags.staging.empty()) {
    WL_ASSIGN_OR_RETURN(uint64_t staging, ParseSize(flags.staging));
    options.staging_bytes = static_cast<size_t>(staging);
  }
  WL_RETURN_IF_ERROR(options.Validate());
  return options;
}

std::string FormatBytes(uint64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= 1000ull * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  } else if (bytes >= 1000ull * 1000) {
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(buf, sizeof buf, "%.2f kB", b / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", bytes);
  }
  return buf;
}

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
