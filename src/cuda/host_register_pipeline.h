// The host-register path: zero-copy from the page cache. Each file is
// mapped (File::Map); a piece is populated and cudaHostRegister'ed
// read-only, the copies go straight from the mapping, and the piece is
// unregistered once its event completed. Each worker keeps two pieces in
// flight, so registering piece i+1 overlaps copying piece i.
#pragma once

#include <cuda_runtime_api.h>

#include <span>
#include <string>

#include "cuda/cuda_util.h"
#include "cuda/load_job.h"
#include "env/mapping.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"

namespace weightlift::internal {

// Whether a device can copy straight from a registered read-only file
// mapping, and if not, why (naming the device attribute).
struct HostRegisterSupport {
  bool ok = false;
  std::string why;  // empty when ok
};
HostRegisterSupport QueryHostRegisterSupport(int device);

class HostRegisterPipeline {
 public:
  // Two events per worker.
  explicit HostRegisterPipeline(CudaEvents piece_events)
      : events_(std::move(piece_events)) {}

  // Runs PLAN (page-aligned chunks of disjoint pages) from MAPPINGS[c.file]
  // on min(pool.size(), chunks) workers; worker w copies on
  // STREAMS[w % STREAMS.size()]. Every piece is unregistered again when Run
  // returns. Errors go to job.Fail.
  void Run(Job& job, const Plan& plan, std::span<const Mapping* const> mappings,
           std::span<const cudaStream_t> streams, int device, ThreadPool& pool);

 private:
  CudaEvents events_;
};

}  // namespace weightlift::internal
