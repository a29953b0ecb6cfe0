#include "cuda/gds_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "cuda/cuda_util.h"

namespace weightlift::internal {

StatusOr<GdsFile> GdsFile::Open(const std::string& path, bool compat) {
  WL_ASSIGN_OR_RETURN(CuFileLib * lib, CuFileLib::Get(compat));
  GdsFile f;
  f.lib_ = lib;
  f.fd_ = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (f.fd_ < 0) {
    int e = errno;
    return Status::IoErrorFromErrno(path + ": open O_DIRECT for GDS", e);
  }
  WL_ASSIGN_OR_RETURN(f.handle_, lib->RegisterFile(f.fd_, path));
  return f;
}

GdsFile& GdsFile::operator=(GdsFile&& o) noexcept {
  if (this != &o) {
    Reset();
    lib_ = std::exchange(o.lib_, nullptr);
    fd_ = std::exchange(o.fd_, -1);
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void GdsFile::Reset() {
  if (handle_ && lib_) lib_->DeregisterFile(handle_);
  handle_ = nullptr;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
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
