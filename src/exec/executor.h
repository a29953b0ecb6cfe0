// The executor: the one read loop, for every destination.
//
// Workers from the loader's pool take a plan's chunks in plan order (so
// each file is read front to back), read them (ReadChunkBytes, or the sink's
// own read for direct chunks) and hand them to a Sink (sink.h), which puts
// the bytes in place: host memory, a CUDA device through pinned staging,
// GDS, ... Completion, progress and the first error are the
// CompletionTracker's; the first error stops every worker from taking more
// chunks, and each drains what it has in flight before Run returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "env/file.h"
#include "exec/completion.h"
#include "exec/sink.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"
#include "util/clock.h"
#include "weightlift/status.h"

namespace weightlift::internal {

struct RunOptions {
  // Workers to use; 0 or more than the pool has: the whole pool (never more
  // than the plan has chunks).
  int threads = 0;
  // Names request tensor T in error messages; may be empty.
  std::function<std::string(uint32_t tensor)> tensor_name;
  // When set, holds the index of the next plan chunk a worker will take,
  // so a helper working ahead of the workers (the host loader's page
  // populator) can skip what they passed.
  std::atomic<size_t>* next_chunk = nullptr;
  // LoadCallbacks::cancel: once true, no worker takes another chunk and the
  // run fails with Cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

// Totals over every RunPlan of a load.
struct ExecStats {
  uint64_t direct_chunks = 0;  // read straight into their destination
  uint64_t bounce_chunks = 0;  // through a sink's slot
  int threads = 0;             // most workers one run used
  // Where the workers' time went, summed over workers (seconds): whether a
  // load was held up by its reads or by its sink (the copies to a GPU) is
  // which of these dominates.
  double read_seconds = 0;       // reading chunks (into slots or in place)
  double slot_wait_seconds = 0;  // waiting for a free slot (AcquireSlot)
  double deliver_seconds = 0;    // handing chunks to the sink (Deliver)
  double drain_seconds = 0;      // waiting for the last deliveries (Drain)
  // Since START (set by the caller before the first RunPlan; the times
  // stay negative without it): the first chunk handed to the sink, the
  // last read done, every worker drained.
  Clock::time_point start{};
  double first_delivery = -1;
  double last_read_end = -1;
  double drained = -1;
};

// The workers' timeline as a report note: "executor: N workers' time:
// reading R ms, waiting for a free slot W ms, ...; first chunk delivered
// at A ms, last read done at B ms, all drained at C ms". Empty when no
// chunk ran.
std::string TimelineNote(const ExecStats& stats);

// Runs PLAN into SINK: FILES[i] serves the plan's file i (non-null for
// every file a chunk reads). Errors go to DONE (its pieces must include the
// plan's: CompletionTracker::AddPieces); returns when every worker has
// drained. Adds to STATS when given.
void RunPlan(const Plan& plan, std::span<File* const> files, Sink& sink,
             ThreadPool& pool, const RunOptions& options,
             CompletionTracker& done, ExecStats* stats);

}  // namespace weightlift::internal
