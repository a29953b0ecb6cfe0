// The GDS path: cuFileRead straight from the file into device memory. A
// GdsFile is one file registered with cuFile; GdsSink is the sink whose
// direct chunks (plain ranges of at most a staging slot, planned like any
// other route) it reads itself, synchronously, on the worker threads. Used
// where the driver has a real direct path, or in cuFile's compatibility
// mode when asked for (see path_choice.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cuda/cufile_lib.h"
#include "env/file.h"
#include "exec/sink.h"
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

class GdsSink final : public Sink {
 public:
  explicit GdsSink(int device) : device_(device) {}

  // The load's registrations: FILES[f] reads checkpoint file f (null where
  // this sink does not read f). They must outlive the load's run.
  void UseFiles(std::vector<const GdsFile*> files) {
    files_ = std::move(files);
  }

  // Direct chunks only: GDS has no staging to copy from.
  uint64_t slot_bytes() const override { return 0; }
  Status BeginWorker(int worker) override;
  // cuFileRead of C (each run of a gather chunk) into device memory.
  Status ReadDirect(int worker, File& file, const ReadChunk& c) override;
  StatusOr<SinkSlot> AcquireSlot(int worker, const ReadChunk& c,
                                 CompletionTracker& done) override;
  Status Deliver(int worker, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override;
  void Abandon(int, SinkSlot) override {}

 private:
  int device_;
  std::vector<const GdsFile*> files_;
};

}  // namespace weightlift::internal
