// Splitting one load over its paths: each path's read plan, how many pieces
// deliver each tensor (the job's completion counters), and the bytes each
// file serves. Pure computation over the choices of path_choice.h.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/cuda_config.h"
#include "cuda/load_job.h"
#include "cuda/path_choice.h"
#include "plan/plan.h"
#include "weightlift/report.h"

namespace weightlift::internal {

struct TransferPlans {
  Plan staging;        // chunks of at most config.slot_bytes
  Plan host_register;  // page-aligned chunks of at most config.piece_bytes
  std::vector<Segment> gds;  // plain ranges, read straight to the device
  // Per checkpoint file, what each path reads from (null: not that path).
  std::vector<File*> staging_files;
  std::vector<const Mapping*> host_register_files;
  std::vector<const GdsFile*> gds_files;
};

// Plans JOB over FILES (from ChoosePaths; they must outlive the result).
// Places each of the job's selections (whole tensors or slices, see
// plan/selection.h) for its file's path. Sets job.remaining for every
// tensor, and REPORT's per-file bytes, bytes_read and the slices note.
TransferPlans PlanTransfers(Job& job, const std::vector<FileChoice>& files,
                            const CudaLoaderConfig& config, LoadReport* report);

}  // namespace weightlift::internal
