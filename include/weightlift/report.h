// LoadReport: what a load did and why. Which path served each file, what
// fell back, how many bytes, how long each phase took.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weightlift/options.h"

namespace weightlift {

struct FileReport {
  std::string path;
  std::string path_taken;  // "uring", "pread", "gds", "pinned-staging+uring",
                           // "host-register", ...
  std::string reason;      // why this path: "pages 100% resident (sampled)"
  uint64_t bytes = 0;      // tensor bytes delivered from this file
  // Row runs (the rows of a last-dim slice) copied out of a mapping of the
  // page cache instead of read one by one, and the strided reads they took.
  uint64_t copied_row_runs = 0;
  uint64_t copied_row_reads = 0;
};

// How a load's reads were made, counted (its notes say the same in words).
// A load made of several (a group load's batches) adds these up and says
// each such note once, for the whole.
struct ReadCounts {
  // Host loads: reads that landed straight in their destination, and reads
  // into a bounce buffer that were then copied.
  uint64_t direct_reads = 0;
  uint64_t bounced_reads = 0;
  uint64_t registered_buffer_reads = 0;  // io_uring, into registered buffers
  // Slices (requests for part of a tensor), as planned: how many, how each
  // was placed (one range; row runs, read one by one; strided copies out
  // of a covering read), and the bytes selected against the bytes read.
  uint64_t slices = 0;
  uint64_t contiguous_slices = 0;
  uint64_t row_run_slices = 0;
  uint64_t row_run_reads = 0;
  uint64_t strided_slices = 0;
  uint64_t strided_rows = 0;
  uint64_t slice_bytes_selected = 0;
  uint64_t slice_bytes_read = 0;
  // The largest extra cost a read was weighed with when placing slices
  // (requests that cost more than their bytes: O_DIRECT, object storage).
  uint64_t slice_read_cost_bytes = 0;

  // Every count's name and member, in the order above: the keys of the
  // JSON report's "counts" and of Python's report.counts.
  using Field = std::pair<std::string_view, uint64_t ReadCounts::*>;
  static std::span<const Field> Fields();
};

struct LoadReport {
  Device device;
  uint64_t tensors = 0;
  uint64_t bytes = 0;       // tensor bytes delivered
  uint64_t bytes_read = 0;  // bytes read from storage (alignment adds)
  double seconds = 0;       // wall time of the whole load, setup_seconds
                            // included
  // Creating the loader (staging allocation and registration, CUDA streams
  // and events, thread start), paid by the loader's first load and counted
  // in its seconds; 0 for later loads of the same loader.
  double setup_seconds = 0;
  // Resolving the request (names, slices) and checking destinations,
  // opening files, choosing backends.
  double open_seconds = 0;
  double alloc_seconds = 0;     // destination and staging allocation
  double transfer_seconds = 0;  // reads + copies until all done
  uint64_t staging_bytes = 0;   // bounce / pinned memory held
  uint64_t device_bytes = 0;    // device memory allocated by the loader
  int threads = 0;              // worker threads this load used
  // The options in effect (as validated; threads 0 = automatic, resolved
  // above), set for every loader made by Loader::Create; empty only for a
  // loader built another way (internal tests).
  std::optional<LoadOptions> options;
  std::vector<FileReport> files;
  ReadCounts counts;
  std::vector<std::string> notes;  // fallbacks and warnings, one line each

  double gb_per_s() const {
    return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  }
  // Human-readable, several lines.
  std::string ToString() const;
  // One JSON object.
  std::string ToJson() const;
};

}  // namespace weightlift
