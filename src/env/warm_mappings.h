// Row pages filled before the load that copies them (prepare).
//
// A tensor-parallel rank's row-parallel parts are short runs, one per row
// (mapped_rows_file.h): a Llama-2-7B rank copies 262144 of them at any
// rank count. Copied out of a fresh mapping, the first run on each page
// takes a page fault; on the H200 that was 0.91-1.06 us of thread time per
// run with 16 threads (session 8), about 250 ms of the readers' time in
// each load: a fixed cost per run, so it weighs more the smaller a rank's
// share is. With the mapping's page tables filled beforehand the same
// copies cost 0.15 us per run (the development VM, session 19:
// probes/rows_prefault.cc).
//
// Filling them on the load's clock does not pay (MADV_POPULATE_READ per
// run costs more than the fault it saves, session 8). A server knows its
// rank's request long before it loads, while it builds its model:
// weightlift.prepare(checkpoint=, tp_*=) hands the runs here, and threads
// of this object (one per file, a few at most) fill the page tables of a
// whole-file mapping of each file meanwhile. The load that opens the file next
// takes that mapping instead of making its own (one load only: it unmaps the
// mapping when its files close, as it does its own). Filling stops, where it
// got to, when the load takes the mapping. A load that does not take a file's
// mapping (another backend, the file no longer resident) lets it go at its
// start.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "env/file.h"
#include "env/mapping.h"
#include "util/fork_epoch.h"

namespace weightlift::internal {

// ROWS runs of WIDTH bytes, PITCH apart, the first at file offset OFFSET.
struct RowRuns {
  uint64_t offset = 0;
  uint64_t pitch = 0;
  uint64_t width = 0;
  uint64_t rows = 0;
};

// One file's runs to fill, in a mapping of the whole file.
struct WarmFile {
  uint32_t file = 0;  // index into the checkpoint's files
  Mapping map;        // the whole file, read-only shared (File::Map)
  std::vector<RowRuns> runs;
};

// What a load takes: the mapping and how far filling got.
struct WarmMapping {
  Mapping map;
  uint64_t runs_filled = 0;  // rows whose pages are in the page tables
  uint64_t runs_total = 0;
  double fill_seconds = 0;  // the filling thread's time on this file
  int error = 0;            // the errno that ended filling (EFAULT: shrank)
};

class WarmMappings {
 public:
  // Files filled at once: a Llama-2-7B rank's two shards in about half the
  // time of one thread, without taking many cores from the model's
  // construction that prepare overlaps.
  static constexpr int kFillThreads = 4;

  WarmMappings() = default;
  WarmMappings(const WarmMappings&) = delete;
  WarmMappings& operator=(const WarmMappings&) = delete;
  // Stops filling and unmaps whatever no load took.
  ~WarmMappings();

  // Starts filling FILES' runs, each file's in order, on threads of its
  // own: one per file, at most kFillThreads (after stopping and dropping
  // what an earlier Start left). Without a thread (std::system_error) the
  // mappings are kept unfilled.
  void Start(std::vector<WarmFile> files);

  // File FILE's mapping, for one load: stops filling (the runs filled so
  // far stay filled) and hands it over. nullopt when none was made for it
  // or a load took it already.
  std::optional<WarmMapping> Take(uint32_t file);

  // Stops filling and lets every mapping no load took go (unmapped in the
  // background): a load that read the files some other way.
  void Release();

  // Waits until filling has ended (every run filled, or an error).
  void Wait();

  // Whether a mapping waits for FILE (tests, reports).
  bool Holds(uint32_t file) const;

  // In a child forked after this was made, every call above does nothing
  // (Take: nullopt, Holds: false; the load reads as without prepare) and
  // the destructor leaves the filling threads, which stayed in the parent,
  // unjoined, and their mappings mapped (util/fork_epoch.h).

 private:
  struct Entry {
    WarmFile file;
    std::atomic<uint64_t> filled{0};
    std::atomic<int> error{0};
    double seconds = 0;  // written by the filler, read after its join
    bool taken = false;
  };
  // What the filling threads read, and nothing else of this object: in a
  // forked child the destructor abandons it without touching it.
  struct Filling {
    std::vector<std::unique_ptr<Entry>> entries;
    std::atomic<bool> stop{false};
    std::atomic<size_t> next{0};  // the next entry a filling thread takes
  };
  // One filling thread: files from F.next until none.
  static void Fill(Filling& f);
  static void FillFile(const Filling& f, Entry& e);
  void StopLocked();  // REQUIRES: mu_ held
  void JoinLocked();  // REQUIRES: mu_ held

  mutable std::mutex mu_;  // guards filling_->entries (not what Fill reads)
  std::unique_ptr<Filling> filling_ = std::make_unique<Filling>();
  std::vector<std::thread> fillers_;
  MadeInProcess made_;
};

}  // namespace weightlift::internal
