// Page-cache residency of a file (sampled with mincore) and eviction
// (posix_fadvise DONTNEED). Residency picks the backend in auto mode;
// eviction is how benchmarks get a cold file without root.
#pragma once

#include <cstdint>
#include <string>

#include "env/file.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct Residency {
  double fraction = 0;  // resident / sampled pages, 0..1
  uint64_t sampled_pages = 0;
  uint64_t resident_pages = 0;
  int windows = 0;  // how many windows were sampled
};

struct ResidencyOptions {
  int windows = 64;  // spread evenly over the file
  // Pages checked per window. mincore costs per page (~0.1 us each on the
  // development VM): 256 KiB windows took 0.4 ms per file of every load's
  // opening; what tells residency apart is how far the windows spread, and
  // 16 pages still show a partly read window.
  uint64_t window_bytes = 64u << 10;
};

// Samples FILE's residency: mincore over WINDOWS windows of WINDOW_BYTES
// spread over the file (the whole file when it is smaller than that). Maps
// the file without touching its pages, so it costs microseconds even for
// 10 GB. An empty file reports fraction 1 (nothing to read). Unsupported
// when FILE cannot be mapped (object storage): residency unknown.
StatusOr<Residency> SampleResidency(const File& file,
                                    const ResidencyOptions& options = {});
StatusOr<Residency> SampleResidency(const std::string& path,
                                    const ResidencyOptions& options = {});

// True when FILE lives on tmpfs or ramfs (fstatfs): always resident, so
// residency sampling is moot. False when unknown (no descriptor).
bool OnMemoryFileSystem(const File& file);

// Drops PATH's clean pages from the page cache (fdatasync first so dirty
// pages become droppable). Advisory: the kernel may keep pages that are
// mapped or locked by someone else.
Status EvictFromPageCache(const std::string& path);

}  // namespace weightlift::internal
