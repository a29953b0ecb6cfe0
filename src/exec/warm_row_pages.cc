#include "exec/warm_row_pages.h"

#include <utility>

#include "env/mapped_rows_file.h"
#include "env/page_cache.h"
#include "env/warm_mappings.h"
#include "exec/request.h"
#include "format/held_files.h"
#include "util/percent.h"

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
    const std::string& path = ckpt.files()[i].path;
    WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                        OpenForLoad(ckpt, i, Backend::kPread, IoOptions{}));
    if (f->native_fd() < 0) {
      out.skipped.push_back(path + ": not a local file");
      continue;
    }
    StatusOr<Residency> res = SampleResidency(*f);
    if (!res.ok() || res->fraction < resident_threshold) {
      out.skipped.push_back(
          path + ": " +
          (res.ok() ? "pages " + Percent(res->fraction) + " resident"
                    : "residency unknown (" + res.status().message() + ")"));
      continue;
    }
    StatusOr<Mapping> map = f->Map(0, f->size(), MapAccess::kReadShared);
    if (!map.ok()) {
      out.skipped.push_back(path + ": cannot be mapped (" +
                            map.status().message() + ")");
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
