// The GDS path: cuFileRead straight from the file into device memory, one
// read of at most unit_bytes per piece, synchronous, on the worker threads.
// Used only where the driver has a real direct path (see path_choice.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cuda/cufile_lib.h"
#include "cuda/load_job.h"
#include "env/file.h"
#include "exec/thread_pool.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// A file opened with O_DIRECT and registered with cuFile. Deregistered and
// closed with the owner, on every path (also when a later file's choice
// fails). Move-only.
class GdsFile {
 public:
  GdsFile() = default;
  // FILE's open file again with O_DIRECT (File::Reopen, so the very file
  // the load holds), registered with cuFile. Unsupported/IoError naming why
  // cuFile cannot take it (library or driver missing, O_DIRECT refused,
  // cuFileHandleRegister error). COMPAT: cuFile in its compatibility mode
  // (see CuFileLib::Get).
  static StatusOr<GdsFile> Open(const File& file, bool compat = false);
  GdsFile(GdsFile&& o) noexcept { *this = std::move(o); }
  GdsFile& operator=(GdsFile&& o) noexcept;
  ~GdsFile() { Reset(); }
  CuFileHandle handle() const { return handle_; }
  CuFileLib* lib() const { return lib_; }

 private:
  void Reset();
  CuFileLib* lib_ = nullptr;
  std::unique_ptr<File> direct_;  // the O_DIRECT view cuFile reads
  CuFileHandle handle_ = nullptr;
};

// How many GDS reads (= Delivered calls) a segment of SIZE bytes takes.
uint32_t GdsPieces(uint64_t size, uint64_t unit_bytes);

// Reads SEGMENTS (plain ranges, rows == 1: GDS has no staging to place a
// strided copy from) of files with FILES[file] != null straight into device
// memory, in reads of at most UNIT_BYTES (see GdsPieces), on min(pool.size(),
// reads) workers. Errors go to job.Fail; returns an error only when
// libcufile is unusable.
Status RunGds(Job& job, std::span<const Segment> segments,
              std::span<const GdsFile* const> files, uint64_t unit_bytes,
              int device, ThreadPool& pool);

}  // namespace weightlift::internal
