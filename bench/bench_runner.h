// The measurements behind `weightlift bench` and `weightlift demo`: the
// loader, cold and warm, against the storage and page-cache ceilings, the
// naive loaders and (for CUDA) the pinned host-to-device copy ceiling, all on
// the same files in the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/report.h"
#include "weightlift/status.h"

namespace weightlift::bench {

enum class Mode { kCold, kWarm };
const char* ModeName(Mode m);

// Row ids (stable; used as JSON keys).
inline constexpr char kLoader[] = "loader";
inline constexpr char kStorageCeiling[] = "storage_ceiling";
inline constexpr char kPageCacheCeiling[] = "page_cache_ceiling";
inline constexpr char kNaiveMmap[] = "naive_mmap";
inline constexpr char kNaivePread[] = "naive_pread";
inline constexpr char kPinnedCopy[] = "pinned_h2d_ceiling";
inline constexpr char kFreshMemory[] = "fresh_memory_ceiling";
// Host only: the same loader through LoadInto() into memory the bench
// allocated and touched beforehand, and one thread's buffered read of the
// files into that memory: the pair separates the engine from the first
// touch of fresh memory that Load() pays.
inline constexpr char kLoaderInto[] = "loader_into_touched";
inline constexpr char kSequentialInto[] = "sequential_read_into_touched";
// Host only: one thread's buffered read of the files into new memory (a
// buffer per file), the warm reference for Load(), which also returns new
// memory and so pays the same first touch.
inline constexpr char kSequentialFresh[] = "sequential_read_into_fresh";

struct BenchOptions {
  LoadOptions load;  // the loader under test (device, backend, ...)
  int repeat = 1;    // passes; the table shows the median
  bool cold = true;
  bool warm = true;
  bool ceilings = true;  // storage / page-cache / pinned-copy ceilings
  bool naive_pread = true;
  // Host devices: also LoadInto() and a sequential read into pre-touched
  // memory (holds one more copy of the tensors for the whole bench).
  bool into_touched = true;
  // Called before each step with a short description ("cold 1/3: loader").
  std::function<void(const std::string&)> on_step;
  // Loader progress within a step (for a progress bar).
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

// One measured thing in one mode, over `repeat` passes.
struct Measurement {
  std::string id;     // kLoader, ...
  std::string label;  // "naive: mmap + copy per tensor"
  Mode mode = Mode::kCold;
  std::string method;           // what exactly ran (from the last pass)
  uint64_t bytes = 0;           // bytes per pass
  std::vector<double> seconds;  // one per pass
  double median_gbps() const;
  double best_gbps() const;
};

struct BenchReport {
  std::string path;
  Device device;
  uint64_t files = 0;
  uint64_t tensors = 0;
  uint64_t bytes = 0;  // tensor bytes
  int repeat = 1;
  std::vector<Measurement> rows;
  // The loader's own reports of the last pass per mode (which path, why).
  bool have_cold_report = false, have_warm_report = false;
  LoadReport cold_report, warm_report;
  // Resident fraction measured after each cold eviction (worst seen).
  double max_resident_after_evict = 0;
  uint64_t peak_rss_after_loader = 0;  // getrusage high-water marks
  uint64_t peak_rss_end = 0;
  std::vector<std::string> notes;

  const Measurement* Find(const std::string& id, Mode mode) const;
  // Median GB/s of the loader divided by that of ID in MODE; 0 if absent.
  double Ratio(const std::string& id, Mode mode) const;
  // Median GB/s of NUM divided by that of DEN in MODE; 0 if either is absent.
  double RatioOf(const std::string& num, const std::string& den,
                 Mode mode) const;
  // The table of GB/s and ratios (several lines).
  std::string ToTable() const;
  // One JSON object.
  std::string ToJson() const;
};

// Runs every measurement the options ask for on CKPT (PATH is only shown).
// Cold = the files are evicted from the page cache before each measurement;
// warm = they were read once first.
StatusOr<BenchReport> RunBench(const std::string& path, const Checkpoint& ckpt,
                               const BenchOptions& options);

}  // namespace weightlift::bench
