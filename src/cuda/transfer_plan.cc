#include "cuda/transfer_plan.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "cuda/gds_path.h"

namespace weightlift::internal {

TransferPlans PlanTransfers(Job& job, const std::vector<FileChoice>& files,
                            const CudaLoaderConfig& config,
                            LoadReport* report) {
  const Checkpoint& ckpt = *job.ckpt;
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

  std::vector<Segment> staging_segs, hr_segs, gds_placed;
  PlacementStats placement;
  for (uint32_t r = 0; r < job.selections.size(); ++r) {
    const TensorSelection& sel = job.selections[r];
    // Zero-byte tensors touch no file (FilesNeeded skips them), so their
    // file may have no report entry: report_index is -1 there.
    if (sel.bytes == 0) continue;
    report->files[files[sel.file].report_index].bytes += sel.bytes;
    PlaceOptions po;
    switch (files[sel.file].path) {
      case TransferPath::kStaging: {
        // A strided chunk is one staging slot; the planner's cap for it.
        const uint64_t a = staging_pf[sel.file].alignment;
        po.granularity = a;
        po.max_chunk_bytes = std::max<uint64_t>(a, config.slot_bytes / a * a);
        PlaceSelection(sel, job.dst[r], r, po, &staging_segs, &placement);
        break;
      }
      case TransferPath::kHostRegister:
        // Copies straight from the mapped file, registered in pages.
        po.granularity = kPageBytes;
        po.max_chunk_bytes = std::max<uint64_t>(
            kPageBytes, config.piece_bytes / kPageBytes * kPageBytes);
        PlaceSelection(sel, job.dst[r], r, po, &hr_segs, &placement);
        break;
      case TransferPath::kGds:
        po.granularity = kPageBytes;
        po.max_chunk_bytes = 0;  // no staging to copy a stride from
        gds_placed.clear();
        PlaceSelection(sel, job.dst[r], r, po, &gds_placed, &placement);
        for (const Segment& s : gds_placed) AppendRows(s, &p.gds);
        break;
    }
  }
  PlanOptions spo;
  // The planner keeps every aligned read span within chunk_bytes: a slot,
  // or less for a small load (one slice) so that it spreads over every
  // worker.
  uint64_t staging_bytes = 0;
  for (const Segment& s : staging_segs) staging_bytes += s.bytes();
  spo.chunk_bytes =
      ChunkBytesFor(staging_bytes, config.threads, config.slot_bytes,
                    kMinChunkBytes, kPageBytes);
  spo.direct_min_bytes = UINT64_MAX;
  p.staging = MakePlan(staging_segs, staging_pf, job.tensors.size(), spo);
  PlanOptions hpo;
  hpo.chunk_bytes = config.piece_bytes;
  hpo.direct_min_bytes = UINT64_MAX;
  p.host_register = MakePlan(hr_segs, hr_pf, job.tensors.size(), hpo);

  std::vector<uint32_t> gds_pieces(job.tensors.size(), 0);
  uint64_t gds_bytes = 0;
  for (const Segment& s : p.gds) {
    gds_pieces[s.tensor] += GdsPieces(s.length, config.slot_bytes);
    gds_bytes += s.length;
  }
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    uint32_t n = p.staging.pieces_per_tensor[r] +
                 p.host_register.pieces_per_tensor[r] + gds_pieces[r];
    job.remaining[r].store(n, std::memory_order_relaxed);
  }
  report->bytes_read =
      p.staging.bytes_read + p.host_register.bytes_read + gds_bytes;
  if (std::string note = placement.Note(); !note.empty()) {
    report->notes.push_back(std::move(note));
  }
  return p;
}

}  // namespace weightlift::internal
