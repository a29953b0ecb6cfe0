// LoadTarget: the device side of the one Loader (loader_core.h). The core
// resolves requests, opens files, places selections, plans, tracks
// completion, runs the executor and fills the report; a target says where
// the bytes go (one allocation per Load, the caller's pointers for
// LoadInto) and through which sinks each file is read (its Routing).
//
// Two targets exist: host memory (host_loader.cc: HostSink) and a CUDA
// device (cuda/cuda_loader.cc: pinned staging, host-register and GDS
// sinks, chosen per file by cuda/path_choice.cc). A new destination kind
// (a process group's collective) is one more target, or one more route of
// an existing target: a sink and how to plan for it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "exec/executor.h"
#include "exec/open_files.h"
#include "exec/sink.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/report.h"

namespace weightlift::internal {

// One sink of a load and how its plan is made.
struct Route {
  Sink* sink = nullptr;
  int threads = 0;  // RunOptions::threads
  // chunk_bytes: the largest read (at most the sink's slot).
  PlanOptions plan;
  // A small load's plan uses smaller chunks so that every worker gets some
  // (ChunkBytesFor, aligned to this; 0: always chunk_bytes).
  uint64_t spread_alignment = 0;
  // Whether slices may be placed as covering reads with a strided copy out
  // of a slot, or read as gathered row runs (the sink has slots); else
  // every row is a plain range (GDS).
  bool strided = true;
  // Selections whose bytes are already in memory the sink copies from
  // (Routing::in_place: pages prepare registered) are placed and planned
  // apart: at IN_PLACE_GRANULARITY, every block that fits a chunk of
  // in_place_plan strided (covering rows costs nothing,
  // PlaceOptions::covering_is_free), then merged into the route's plan
  // (MergeInPlace), so that one run reads the other selections while the
  // sink copies these (ReadChunk::in_place). chunk_bytes 0: this route
  // takes none.
  PlanOptions in_place_plan{0, UINT64_MAX};
  uint64_t in_place_granularity = 1;
};

// How one checkpoint file is read.
struct FileRoute {
  int route = -1;            // index into Routing::routes; -1: not read
  File* file = nullptr;      // what the executor reads (owned by OpenedFile)
  PlanFile plan;             // size, read alignment, may reads land in place
  uint64_t granularity = 1;  // PlaceOptions::granularity for its slices
  int report_index = -1;     // its entry in LoadReport::files
};

struct Routing {
  std::vector<Route> routes;     // run one after another, in this order
  std::vector<FileRoute> files;  // per checkpoint file
  // Per selection: its bytes are in place for its file's route (which then
  // has in_place_plan); empty when none is.
  std::vector<bool> in_place;
  // Whatever the routes' sinks use for this load only (mappings, GDS
  // registrations); released when the load ends, after every run.
  std::shared_ptr<void> state;
};

// Where a Load() puts its selections: DSTS[k] for selection k, all kept
// alive by OWNER.
struct Allocation {
  std::shared_ptr<void> owner;
  std::vector<uintptr_t> dsts;
  // New host memory of the loader's, not touched yet: fault it in ahead of
  // the readers (populator.h).
  bool fresh_host = false;
};

class LoadTarget {
 public:
  virtual ~LoadTarget() = default;

  virtual Device device() const = 0;
  virtual ThreadPool& pool() = 0;
  // The loader's long-lived read memory (bounce pool, pinned ring) that
  // io_uring files may register (MemoryToRegister).
  virtual std::span<std::byte> read_memory() const = 0;
  // Of SELS laid out by this target's Allocate, the bytes that may pass
  // through read_memory(): registering it with io_uring (which faults in
  // and pins all of it) repays only for that much traffic
  // (MemoryToRegister). By default every byte (a staging ring carries all).
  virtual uint64_t BounceBytes(std::span<const TensorSelection> sels) const {
    uint64_t bytes = 0;
    for (const TensorSelection& sel : sels) bytes += sel.bytes;
    return bytes;
  }

  // Every load starts here (CUDA: makes the device current): fills what
  // the target knows (threads, staging_bytes, standing notes).
  // REPORT's setup_seconds is already set: > 0 only for the load that is
  // charged with the loader's creation.
  virtual Status BeginLoad(LoadReport* report) = 0;
  // LoadInto: InvalidArgument for a destination the device cannot take.
  virtual Status CheckDestinations(std::span<const Destination> dests) = 0;
  // Load()/LoadSlices(): one allocation for SELS (read through OPENED);
  // sets report->alloc_seconds (and device_bytes).
  virtual StatusOr<Allocation> Allocate(const Checkpoint& ckpt,
                                        std::span<const TensorSelection> sels,
                                        const std::vector<OpenedFile>& opened,
                                        LoadReport* report) = 0;
  // The routes of a load of SELS reading the files with NEEDED[i] (open in
  // OPENED); appends a FileReport for every file read (bytes 0) and notes.
  virtual StatusOr<Routing> Route(const Checkpoint& ckpt,
                                  std::span<const TensorSelection> sels,
                                  const std::vector<bool>& needed,
                                  const std::vector<OpenedFile>& opened,
                                  LoadReport* report) = 0;
  // Every run of a successful load is done: notes from STATS.
  virtual void EndLoad(const ExecStats& stats, LoadReport* report) {
    (void)stats;
    (void)report;
  }
};

}  // namespace weightlift::internal
