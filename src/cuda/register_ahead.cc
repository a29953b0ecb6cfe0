#include "cuda/register_ahead.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
  std::vector<std::vector<PageSpan>> spans =
      PageSpansOf(selections, sizes, page);
  RegisteringAhead out;
  uint64_t span_bytes = 0, selected = 0;
  for (const std::vector<PageSpan>& f : spans) span_bytes += SpanBytes(f);
  for (const TensorSelection& sel : selections) selected += sel.bytes;
  if (!forced &&
      static_cast<double>(span_bytes) >
          kMaxRegisteredPerSelected * static_cast<double>(selected)) {
    char buf[220];
    std::snprintf(buf, sizeof buf,
                  "its pages are %.2f GB for %.2f GB selected (%.1fx, more "
                  "than %.1fx: the rows of row-parallel parts), so not "
                  "registered ahead (host_register=on registers them)",
                  static_cast<double>(span_bytes) / 1e9,
                  static_cast<double>(selected) / 1e9,
                  static_cast<double>(span_bytes) /
                      static_cast<double>(std::max<uint64_t>(selected, 1)),
                  kMaxRegisteredPerSelected);
    for (uint32_t i = 0; i < spans.size(); ++i) {
      if (!spans[i].empty()) {
        out.skipped.push_back(ckpt.files()[i].path + ": " + buf);
      }
    }
    HeldFiles::Prepared(ckpt).Put(RegisteredPages::Declined(device, buf));
    return out;
  }
  std::vector<RegisterFile> files;
  for (uint32_t i = 0; i < spans.size(); ++i) {
    if (spans[i].empty()) continue;
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
                    : RegisteredPages::Start(device, std::move(files)));
  return out;
}

}  // namespace weightlift::internal
