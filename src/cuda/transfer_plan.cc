#include "cuda/transfer_plan.h"

#include <atomic>

#include "cuda/gds_path.h"

namespace weightlift::internal {

TransferPlans PlanTransfers(Job& job, const std::vector<FileChoice>& files,
                            const CudaLoaderConfig& config,
                            LoadReport* report) {
  const Checkpoint& ckpt = *job.ckpt;
  const auto& all = ckpt.tensors();
  std::vector<Segment> staging_segs, hr_segs;
  std::vector<uint32_t> gds_pieces(job.tensors.size(), 0);
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    const TensorInfo& t = all[job.tensors[r]];
    // Zero-byte tensors touch no file (FilesNeeded skips them), so their
    // file may have no report entry: report_index is -1 there.
    if (t.size == 0) continue;
    report->files[files[t.file].report_index].bytes += t.size;
    Segment seg{t.file, t.offset, t.size, job.dst[r], r};
    switch (files[t.file].path) {
      case TransferPath::kStaging:
        staging_segs.push_back(seg);
        break;
      case TransferPath::kHostRegister:
        hr_segs.push_back(seg);
        break;
      case TransferPath::kGds:
        gds_pieces[r] = GdsPieces(t.size, config.slot_bytes);
        break;
    }
  }
  TransferPlans p;
  std::vector<PlanFile> staging_pf(files.size()), hr_pf(files.size());
  p.staging_files.assign(files.size(), nullptr);
  p.host_register_files.assign(files.size(), nullptr);
  p.gds_files.assign(files.size(), nullptr);
  for (size_t i = 0; i < files.size(); ++i) {
    staging_pf[i].size = hr_pf[i].size = ckpt.files()[i].size;
    staging_pf[i].allow_direct = hr_pf[i].allow_direct = false;
    hr_pf[i].alignment = kPageBytes;
    if (!files[i].needed) continue;
    switch (files[i].path) {
      case TransferPath::kStaging:
        staging_pf[i].alignment = files[i].file->alignment();
        p.staging_files[i] = files[i].file;
        break;
      case TransferPath::kHostRegister:
        p.host_register_files[i] = &files[i].mapping;
        break;
      case TransferPath::kGds:
        p.gds_files[i] = &files[i].gds;
        break;
    }
  }
  PlanOptions spo;
  // The planner keeps every aligned read span within chunk_bytes.
  spo.chunk_bytes = config.slot_bytes;
  spo.direct_min_bytes = UINT64_MAX;
  p.staging = MakePlan(staging_segs, staging_pf, job.tensors.size(), spo);
  PlanOptions hpo;
  hpo.chunk_bytes = config.piece_bytes;
  hpo.direct_min_bytes = UINT64_MAX;
  p.host_register = MakePlan(hr_segs, hr_pf, job.tensors.size(), hpo);

  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    uint32_t n = p.staging.pieces_per_tensor[r] +
                 p.host_register.pieces_per_tensor[r] + gds_pieces[r];
    job.remaining[r].store(n, std::memory_order_relaxed);
  }
  report->bytes_read = p.staging.bytes_read + p.host_register.bytes_read;
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    if (gds_pieces[r]) report->bytes_read += all[job.tensors[r]].size;
  }
  return p;
}

}  // namespace weightlift::internal
