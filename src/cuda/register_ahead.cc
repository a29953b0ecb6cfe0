#include "cuda/register_ahead.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "cuda/cuda_config.h"
#include "cuda/cuda_util.h"
#include "cuda/host_register_sink.h"
#include "cuda/registered_pages.h"
#include "exec/request.h"
#include "exec/resident_mapping.h"
#include "format/held_files.h"
#include "plan/page_spans.h"

namespace weightlift::internal {

StatusOr<RegisteringAhead> RegisterPagesAhead(
    const Checkpoint& ckpt, std::span<const TensorRequest> requests, int device,
    double resident_threshold, bool forced) {
  // Whatever an earlier prepare left is stale now, whatever happens below.
  HeldFiles::Prepared(ckpt).Put(nullptr);
  WL_RETURN_IF_ERROR(CheckCudaDevice(device));
  const HostRegisterSupport support = QueryHostRegisterSupport(device);
  if (!support.ok) return Status::Unsupported(support.why);
  WL_ASSIGN_OR_RETURN(std::vector<TensorSelection> selections,
                      ResolveRequests(ckpt, requests));
  // No two registrations may share a page of the system's (64 KiB on some
  // ARM hosts), and every chunk of the load (aligned to kPageBytes) must lie
  // in one span.
  const uint64_t page = std::max<uint64_t>(
      kPageBytes, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  std::vector<uint64_t> sizes;
  for (const FileInfo& f : ckpt.files()) sizes.push_back(f.size);
  const uint64_t made_for = SelectionsDigest(selections);
  std::vector<bool> touched(ckpt.files().size(), false);
  for (const TensorSelection& sel : selections) {
    touched[sel.file] = touched[sel.file] || sel.bytes > 0;
  }
  // The selections worth their pages (all of them when forced); the others
  // are staged.
  const PageCostSplit split =
      SplitByPageCost(std::move(selections), sizes, page,
                      forced ? std::numeric_limits<double>::infinity()
                             : kMaxRegisteredPerSelected);
  RegisteringAhead out;
  out.left_bytes = split.left_bytes;
  std::string left_out;
  if (split.left_count > 0) {
    char buf[260];
    std::snprintf(buf, sizeof buf,
                  "%llu selection(s) of %.2f GB whose pages are more than "
                  "%.1fx their bytes (%.2f GB: the rows of row-parallel "
                  "parts) were left to staging (host_register=on registers "
                  "them too)",
                  static_cast<unsigned long long>(split.left_count),
                  static_cast<double>(split.left_bytes) / 1e9,
                  kMaxRegisteredPerSelected,
                  static_cast<double>(split.left_pages) / 1e9);
    left_out = buf;
  }
  std::vector<std::vector<PageSpan>> spans =
      PageSpansOf(split.worth, sizes, page);
  if (split.worth.empty()) {
    const std::string why = left_out.empty() ? "it selects no bytes" : left_out;
    for (uint32_t i = 0; i < ckpt.files().size(); ++i) {
      if (!touched[i]) continue;
      out.skipped.push_back(ckpt.files()[i].path +
                            ": not registered ahead: " + why);
    }
    HeldFiles::Prepared(ckpt).Put(
        RegisteredPages::Declined(device, made_for, why));
    return out;
  }
  std::vector<RegisterFile> files;
  for (uint32_t i = 0; i < spans.size(); ++i) {
    if (spans[i].empty()) {
      if (touched[i]) {
        out.skipped.push_back(ckpt.files()[i].path +
                              ": not registered ahead: " + left_out);
      }
      continue;
    }
    std::string skipped;
    WL_ASSIGN_OR_RETURN(std::optional<Mapping> map,
                        MapResidentFile(ckpt, i, resident_threshold, &skipped));
    if (!map) {
      out.skipped.push_back(std::move(skipped));
      continue;
    }
    RegisterFile r;
    r.file = i;
    r.path = ckpt.files()[i].path;
    r.map = std::move(*map);
    r.spans = std::move(spans[i]);
    out.bytes += SpanBytes(r.spans);
    files.push_back(std::move(r));
    ++out.files;
  }
  HeldFiles::Prepared(ckpt).Put(
      files.empty() ? nullptr
                    : RegisteredPages::Start(device, std::move(files), made_for,
                                             std::move(left_out)));
  return out;
}

}  // namespace weightlift::internal
