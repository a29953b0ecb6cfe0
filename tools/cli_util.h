// Shared pieces of the `weightlift` command: the error -> exit-code mapping,
// size parsing, opening a checkpoint with a clear message, number formatting
// and the terminal progress bar.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::cli {

// Exit codes of the command. Stable: scripts test them.
enum ExitCode : int {
  kExitOk = 0,
  kExitOther = 1,        // anything not listed below (CUDA, memory, bugs)
  kExitUsage = 2,        // bad command line: unknown flag, bad value
  kExitFormat = 3,       // the checkpoint breaks the safetensors format
  kExitIo = 4,           // a system call failed or a file came back short
  kExitUnsupported = 5,  // backend or feature unavailable in this build/host
  kExitNotFound = 6,     // file, directory, shard or tensor does not exist
};

// The text `weightlift --help` shows for the exit codes.
extern const char kExitCodesHelp[];
// What SIZE means in every flag that takes one (ParseByteSize).
extern const char kSizeHelp[];

// The one mapping from a Status category to an exit code.
int ExitCodeFor(StatusCode code);

// Prints "weightlift: error: <status>" to stderr and returns its exit code.
int ReportError(const Status& status);

// A flag check for CLI11's ->check(): empty when PARSE accepts the text,
// else PARSE's message. Values are then checked while parsing (a usage
// error naming the flag) by the same parser that maps them later, so the
// accepted names live in one place (options.h).
template <typename Parse>
std::function<std::string(const std::string&)> CheckedBy(Parse parse) {
  return [parse](const std::string& text) -> std::string {
    auto v = parse(text);
    return v.ok() ? std::string() : v.status().message();
  };
}

// Opens PATH as a checkpoint. A path that does not exist is NotFound with a
// plain message; everything else is Checkpoint::Open's own status.
StatusOr<Checkpoint> OpenCheckpoint(const std::string& path);

// The shared load flags as given (text). Empty strings and threads 0 keep
// the defaults. MakeLoadOptions maps them with SetLoadOption (the mapping
// Python uses too) and validates: InvalidArgument on bad values.
struct LoadFlags {
  std::string device = "cpu";
  std::string backend = "auto";
  std::string gds = "auto";
  int threads = 0;
  std::string chunk;
  std::string staging;
};
StatusOr<LoadOptions> MakeLoadOptions(const LoadFlags& flags);

// "12.55 GiB": byte counts in binary units, as every report prints them
// (FormatByteSize).
std::string FormatBytes(uint64_t bytes);
// "2.31 GB/s"; "-" when seconds <= 0.
std::string FormatRate(uint64_t bytes, double seconds);
// Shape as "[4096, 11008]".
std::string FormatShape(const std::vector<uint64_t>& shape);

// NAME with control characters shown as \xNN, so text from an untrusted
// file cannot drive the terminal.
std::string Printable(std::string_view text);

// Peak resident set size of this process so far, in bytes (getrusage).
uint64_t PeakRssBytes();

// A one-line progress bar on stderr, drawn only when stderr is a terminal
// and the load has already run for a while (short loads print nothing).
// Update() is thread-safe and cheap to call often (it redraws at most ten
// times a second).
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();  // Finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(uint64_t done, uint64_t total);
  // Erases the bar if one was drawn.
  void Finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace weightlift::cli
