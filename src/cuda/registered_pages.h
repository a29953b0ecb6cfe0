// prepare's half of a zero-copy load: the pages of a checkpoint's files that
// one load will copy from, registered with its CUDA device
// (cudaHostRegister, read-only) on a thread of their own while the caller
// builds its model. The load they were made for takes them (cuda_loader.cc)
// and copies each selection whose blocks lie in registered spans straight
// out of the page cache (nothing read, no staging copy), in the same run
// as it stages the rest: what prepare left out (register_ahead.h) and what
// it had not registered yet when the load began. After the load, the pages
// are unregistered and unmapped in the background.
//
// Why ahead: on the H200 a registered page-cache mapping copies to the
// device as fast as pinned memory does, 1D and 2D (a rank of 8's row
// parts: 53-54 GB/s against 53-55), but registering costs about 21 ms per
// GB (session 21, bench/results/2026-12-05-h200-session21/), and while it
// runs every CUDA copy of the process waits. On the load's clock that lost
// to pinned staging (docs/performance.md); ahead of it, the load is copies
// alone, with no reader competing with them for memory bandwidth.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "env/mapping.h"
#include "format/prepared_pages.h"
#include "plan/page_spans.h"
#include "util/fork_epoch.h"

namespace weightlift::internal {

// One file's part: its mapping (the whole file, shared read-only) and the
// spans of it to register.
struct RegisterFile {
  uint32_t file = 0;  // index into the checkpoint's files()
  std::string path;   // for errors and notes
  Mapping map;
  std::vector<PageSpan> spans;
};

class RegisteredPages final : public PreparedPages {
 public:
  // Starts registering FILES' spans with DEVICE, file by file, span by span
  // (one registration per span: a copy never crosses two), on a thread of
  // its own; returns at once. MADE_FOR is the digest of the selections of
  // the load they are for (SelectionsDigest); LEFT_OUT says what prepare
  // left to staging (empty: nothing). Without a thread (std::system_error)
  // nothing is registered and every file says so.
  static std::shared_ptr<RegisteredPages> Start(int device,
                                                std::vector<RegisterFile> files,
                                                uint64_t made_for,
                                                std::string left_out);
  // Stops registering, unregisters what was registered (on DEVICE) and
  // unmaps. In a child forked after Start, leaves the parent's thread and
  // everything it used alone (util/fork_epoch.h).
  ~RegisteredPages() override;

  // In CKPT's slot instead of pages: prepare registered none for the load
  // MADE_FOR, because of WHY (that load's report says so).
  static std::shared_ptr<RegisteredPages> Declined(int device,
                                                   uint64_t made_for,
                                                   std::string why);

  int device() const { return device_; }
  // Whether they are for a load of selections with digest DIGEST: another
  // load leaves them for that one.
  bool MadeFor(uint64_t digest) const { return made_for_ == digest; }
  // Why prepare registered nothing; empty when it registered.
  const std::string& declined() const { return declined_; }
  // What prepare left to staging, in words; empty when nothing.
  const std::string& left_out() const { return left_out_; }
  // Stops registering (a span under way finishes; what is registered
  // stays) and waits for the thread. Idempotent. Stop and Wait do nothing
  // in a child forked after Start (the thread stayed in the parent).
  void Stop();
  // Waits until every span is registered or registration failed (tests and
  // benchmarks; a load calls Stop).
  void Wait();

  // After Stop: the mapping of SEL's file when every block of SEL lies in
  // one of its registered spans (the load copies SEL straight out of it);
  // else null.
  const Mapping* InPlace(const TensorSelection& sel) const;
  // After Stop: FILE's mapping when some of its spans are registered; else
  // null.
  const Mapping* FileMapping(uint32_t file) const;
  // After Stop: why some of FILE's spans are not registered ("" when all
  // are), in words.
  std::string Shortfall(uint32_t file) const;

  // What was asked and done (for notes): bytes in spans, bytes registered,
  // seconds the thread spent registering.
  uint64_t bytes() const;
  uint64_t registered_bytes() const;
  uint64_t registered_file_bytes(uint32_t file) const;
  double seconds() const;

 private:
  struct FileState {
    RegisterFile f;
    size_t done = 0;    // spans registered, in order
    std::string error;  // the failed registration, when one failed
  };
  // What the registering thread reads and writes: the files' states and
  // the stop flag. In a forked child it is abandoned untouched.
  struct Work {
    int device = 0;
    std::vector<FileState> files;
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
    double seconds = 0;  // written by the thread, read after its join
  };
  static void Register(Work& w);

  RegisteredPages(int device, uint64_t made_for);
  void Unregister();
  const FileState* Find(uint32_t file) const;  // null when not asked for
  // The spans of FS registered so far.
  static std::span<const PageSpan> RegisteredSpans(const FileState& fs);

  const int device_;
  const uint64_t made_for_;
  std::string left_out_;
  std::shared_ptr<Work> work_;
  std::thread thread_;
  std::mutex mu_;  // guards thread_'s join
  bool stopped_ = false;
  std::string declined_;
  MadeInProcess made_;
};

}  // namespace weightlift::internal
