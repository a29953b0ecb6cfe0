// prepare's half of a zero-copy load: the pages of a checkpoint's files that
// one load will copy from, registered with its CUDA device
// (cudaHostRegister, read-only) on a thread of their own while the caller
// builds its model. The load takes them (cuda_loader.cc): a file whose
// spans are all registered, and cover every block the load selects from
// it, is copied straight out of the page cache (host-register, nothing read,
// no staging copy); any other file goes the usual way (path_choice.cc says
// why). After the load, the pages are unregistered and unmapped in the
// background.
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
  // its own; returns at once. Without a thread (std::system_error) nothing
  // is registered and every file says so.
  static std::shared_ptr<RegisteredPages> Start(
      int device, std::vector<RegisterFile> files);
  // Stops registering, unregisters what was registered (on DEVICE) and
  // unmaps. In a child forked after Start, leaves the parent's thread and
  // everything it used alone (util/fork_epoch.h).
  ~RegisteredPages() override;

  // In CKPT's slot instead of pages: prepare registered none, for WHY
  // (the load's report says so).
  static std::shared_ptr<RegisteredPages> Declined(int device, std::string why);

  int device() const { return device_; }
  // Why prepare registered nothing; empty when it registered.
  const std::string& declined() const { return declined_; }
  // Whether FILE's spans hold every block of SELS in FILE (whatever has
  // been registered so far: the spans are fixed at Start). A load that
  // needs none of them leaves the pages for the load they were made for.
  bool Holds(uint32_t file, std::span<const TensorSelection> sels) const;
  // Stops registering (a span under way finishes; what is registered
  // stays) and waits for the thread. Idempotent. Stop and Wait do nothing
  // in a child forked after Start (the thread stayed in the parent).
  void Stop();
  // Waits until every span is registered or registration failed (tests and
  // benchmarks; a load calls Stop).
  void Wait();

  // After Stop: FILE's mapping when every span of FILE is registered and
  // together they cover every block of SELS in FILE; else null, with WHY
  // (not null) saying why in words.
  const Mapping* CoveringMapping(uint32_t file,
                                 std::span<const TensorSelection> sels,
                                 std::string* why) const;

  // What was asked and done (for notes): bytes in spans, bytes registered,
  // seconds the thread spent registering.
  uint64_t bytes() const;
  uint64_t file_bytes(uint32_t file) const;  // FILE's spans
  uint64_t registered_bytes() const;
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

  explicit RegisteredPages(int device);
  void Unregister();
  const FileState* Find(uint32_t file) const;  // null when not asked for

  const int device_;
  std::shared_ptr<Work> work_;
  std::thread thread_;
  std::mutex mu_;  // guards thread_'s join
  bool stopped_ = false;
  std::string declined_;
  MadeInProcess made_;
};

}  // namespace weightlift::internal
