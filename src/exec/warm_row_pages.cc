#include "exec/warm_row_pages.h"

#include <utility>

#include "env/mapped_rows_file.h"
#include "env/warm_mappings.h"
#include "exec/request.h"
#include "exec/resident_mapping.h"
#include "format/held_files.h"

namespace weightlift::internal {

StatusOr<WarmedRows> WarmRowPages(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  double resident_threshold) {
  WL_ASSIGN_OR_RETURN(std::vector<TensorSelection> selections,
                      ResolveRequests(ckpt, requests));
  std::vector<std::vector<RowRuns>> runs(ckpt.files().size());
  for (const TensorSelection& sel : selections) {
    for (const RowBlock& b : sel.blocks) {
      if (b.rows <= 1 || b.width == 0 || b.pitch > kMappedRowsMaxPitch) {
        continue;  // one read, or rows read one pread each
      }
      runs[sel.file].push_back({b.file_offset, b.pitch, b.width, b.rows});
    }
  }
  WarmedRows out;
  std::vector<WarmFile> files;
  for (uint32_t i = 0; i < runs.size(); ++i) {
    if (runs[i].empty()) continue;
    std::string skipped;
    WL_ASSIGN_OR_RETURN(std::optional<Mapping> map,
                        MapResidentFile(ckpt, i, resident_threshold, &skipped));
    if (!map) {
      out.skipped.push_back(std::move(skipped));
      continue;
    }
    WarmFile w;
    w.file = i;
    w.map = std::move(*map);
    for (const RowRuns& r : runs[i]) {
      out.runs += r.rows;
      out.bytes += r.rows * r.width;
    }
    w.runs = std::move(runs[i]);
    files.push_back(std::move(w));
    ++out.files;
  }
  if (files.empty()) {
    HeldFiles::Warm(ckpt).Release();  // an earlier prepare's, now stale
  } else {
    HeldFiles::Warm(ckpt).Start(std::move(files));
  }
  return out;
}

}  // namespace weightlift::internal
