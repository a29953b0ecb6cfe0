#include "cuda/gds_path.h"

#include <algorithm>
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

Status GdsSink::BeginWorker(int) { return UseDevice(device_); }

Status GdsSink::ReadDirect(int, File& file, const ReadChunk& c) {
  const GdsFile* gf = c.file < files_.size() ? files_[c.file] : nullptr;
  if (gf == nullptr) {
    return Status::Internal("GDS: file '" + file.path() +
                            "' is not registered with cuFile");
  }
  const uint64_t rows = std::max<uint64_t>(c.rows, 1);
  const uint64_t width = c.length / rows;
  for (uint64_t r = 0; r < rows; ++r) {
    WL_RETURN_IF_ERROR(gf->lib()->Read(
        gf->handle(), reinterpret_cast<void*>(c.direct_dst + r * width), width,
        c.offset + r * c.pitch, file.path()));
  }
  return Status::OK();
}

StatusOr<SinkSlot> GdsSink::AcquireSlot(int, const ReadChunk& c,
                                        CompletionTracker&) {
  return Status::Internal("GDS reads straight to the device; chunk at offset " +
                          std::to_string(c.offset) + " is not direct");
}

Status GdsSink::Deliver(int, const ReadChunk&, SinkSlot, CompletionTracker&) {
  return Status::Internal("GDS has no staging slots");
}

}  // namespace weightlift::internal
