#include "cuda/gds_path.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "cuda/cuda_util.h"

namespace weightlift::internal {

StatusOr<GdsFile> GdsFile::Open(const File& file, bool compat) {
  WL_ASSIGN_OR_RETURN(CuFileLib * lib, CuFileLib::Get(compat));
  GdsFile f;
  f.lib_ = lib;
  // cuFile wants an O_DIRECT descriptor of the very file the load holds.
  StatusOr<std::unique_ptr<File>> direct = file.Reopen(Backend::kDirect, {});
  if (!direct.ok()) return direct.status().WithContext("GDS");
  if ((*direct)->native_fd() < 0) {
    return Status::Unsupported("GDS: file '" + file.path() +
                               "' has no POSIX descriptor");
  }
  f.direct_ = std::move(*direct);
  WL_ASSIGN_OR_RETURN(f.handle_,
                      lib->RegisterFile(f.direct_->native_fd(), file.path()));
  return f;
}

GdsFile& GdsFile::operator=(GdsFile&& o) noexcept {
  if (this != &o) {
    Reset();
    lib_ = std::exchange(o.lib_, nullptr);
    direct_ = std::move(o.direct_);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void GdsFile::Reset() {
  if (handle_ && lib_) lib_->DeregisterFile(handle_);
  handle_ = nullptr;
  direct_.reset();
}

uint32_t GdsPieces(uint64_t size, uint64_t unit_bytes) {
  return static_cast<uint32_t>((size + unit_bytes - 1) / unit_bytes);
}

Status RunGds(Job& job, std::span<const Segment> segments,
              std::span<const GdsFile* const> files, uint64_t unit_bytes,
              int device, ThreadPool& pool) {
  struct Unit {
    uint32_t file, r;
    uint64_t offset, length;
    uintptr_t dst;
  };
  std::vector<Unit> units;
  for (const Segment& s : segments) {
    if (!files[s.file] || s.length == 0) continue;
    for (uint64_t o = 0; o < s.length; o += unit_bytes) {
      uint64_t len = std::min<uint64_t>(unit_bytes, s.length - o);
      units.push_back({s.file, s.tensor, s.file_offset + o, len, s.dst + o});
    }
  }
  if (units.empty()) return Status::OK();
  std::atomic<size_t> next{0};
  auto worker = [&](int) {
    if (Status s = UseDevice(device); !s.ok()) return job.Fail(s);
    while (!job.failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= units.size()) break;
      const Unit& u = units[i];
      const GdsFile& gf = *files[u.file];
      Status s =
          gf.lib()->Read(gf.handle(), reinterpret_cast<void*>(u.dst), u.length,
                         u.offset, job.ckpt->files()[u.file].path);
      if (!s.ok()) return job.Fail(s);
      job.Delivered(u.r, u.length);  // cuFileRead is synchronous
    }
  };
  pool.Run(worker,
           static_cast<int>(std::min<size_t>(pool.size(), units.size())));
  return Status::OK();
}

}  // namespace weightlift::internal
