// Fault injection for tests: errors and partial results the real system
// produces rarely (short reads, EINTR, EIO, a file shrinking under us).
//
// Two layers:
//  - FaultInjector sits BELOW a backend's retry loop (IoOptions::faults): the
//    pread and O_DIRECT backends call it instead of ::pread, the io_uring
//    backend passes every completion through it. So the backends' own loops
//    are what the tests exercise.
//  - FaultInjectingFile wraps any File and fails whole ReadAt calls (EIO at an
//    offset, truncation, the Nth read), for executor and loader tests.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

#include "env/file.h"
#include "env/forwarding_file.h"

namespace weightlift::internal {

struct FaultSpec {
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  // Each call returns at most this many bytes (0: no limit). Use a multiple
  // of the alignment for O_DIRECT backends: the kernel never returns an
  // unaligned short read except at end of file.
  uint64_t max_bytes_per_call = 0;
  // Every Nth call fails with EINTR before reading anything (0: never).
  int eintr_every = 0;
  // A call whose range covers this byte fails with EIO.
  uint64_t eio_offset = kNever;
  // The file looks as if it ends here (reads stop short, then return 0).
  uint64_t truncate_at = kNever;
  // io_uring only: the Nth (1-based) io_uring_submit_and_wait call reports
  // -submit_errno after it ran (the kernel may have taken requests), as a
  // failing io_uring_enter would (0: never).
  int submit_error_call = 0;
  int submit_errno = 0;
  // io_uring only: every ring made after the one made at open fails
  // io_uring_queue_init with -ring_init_errno, as EMFILE or ENOMEM would
  // when concurrent reads need more rings (0: never).
  int ring_init_errno = 0;
  // io_uring only: io_uring_register_buffers fails with -register_errno on
  // every ring (as ENOMEM under a memlock limit would) (0: never).
  int register_buffers_errno = 0;
};

class FaultInjector {
 public:
  explicit FaultInjector(const FaultSpec& spec) : spec_(spec) {}

  // Stands in for ::pread(fd, buf, n, off): same return and errno contract.
  ssize_t Pread(int fd, void* buf, size_t n, off_t off);

  // Filters one read of N bytes at OFF whose real result (bytes, or -errno)
  // is REAL: returns what the backend should see instead (-errno on error).
  // Used by io_uring on each completion; the real read already happened.
  int64_t FilterResult(uint64_t off, uint64_t n, int64_t real);

  // Filters the return value REAL of one io_uring_submit_and_wait call:
  // returns what the backend should see instead.
  int FilterSubmit(int real);

  // Filters the return value REAL of io_uring_queue_init for a ring made
  // after the file was opened.
  int FilterLaterRingInit(int real) const {
    return spec_.ring_init_errno != 0 ? -spec_.ring_init_errno : real;
  }

  // Filters the return value REAL of io_uring_register_buffers.
  int FilterRegisterBuffers(int real) const {
    register_calls_.fetch_add(1);
    return spec_.register_buffers_errno != 0 ? -spec_.register_buffers_errno
                                             : real;
  }
  // io_uring_register_buffers calls seen (each one pins the whole region).
  uint64_t register_calls() const { return register_calls_.load(); }

  uint64_t calls() const { return calls_.load(); }
  uint64_t eintr_injected() const { return eintr_.load(); }
  uint64_t short_injected() const { return short_.load(); }
  uint64_t submits() const { return submits_.load(); }

 private:
  // Decides the fate of one call: returns -errno to fail it, else the number
  // of bytes (<= n) the call may deliver.
  int64_t Decide(uint64_t off, uint64_t n);

  FaultSpec spec_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> eintr_{0};
  std::atomic<uint64_t> short_{0};
  std::atomic<uint64_t> submits_{0};
  mutable std::atomic<uint64_t> register_calls_{0};
};

struct FileFaults {
  static constexpr uint64_t kNever = FaultSpec::kNever;
  uint64_t eio_offset = kNever;   // a ReadAt covering this byte fails (EIO)
  uint64_t truncate_at = kNever;  // a ReadAt reaching past this ends early
  uint64_t fail_read_number = kNever;  // the Nth ReadAt (0-based) fails (EIO)
  // Called before the Nth ReadAt (0-based) with N, before any fault above:
  // lets a test change the real file under a load at a known point
  // (truncate it, rename another file over it). Must be thread-safe.
  std::function<void(uint64_t)> before_read;
};

// Wraps any File (every backend, memory, object storage). size(), path(),
// identity(), Stat(), alignment() and backend_name() are INNER's; Reopen
// wraps INNER's view in the same faults (so faults survive a loader's choice
// of backend); Map is INNER's (a mapping has no reads to fail).
class FaultInjectingFile final : public ForwardingFile {
 public:
  FaultInjectingFile(std::unique_ptr<File> inner, const FileFaults& faults)
      : ForwardingFile(std::move(inner)), faults_(faults) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override;
  // One ReadAt per run (File's own), so that every run meets the faults.
  Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                  uint64_t rows, std::byte* dst) override {
    return File::ReadRows(offset, pitch, width, rows, dst);
  }
  StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const override;
  uint64_t reads() const { return reads_.load(); }

 private:
  FileFaults faults_;
  std::atomic<uint64_t> reads_{0};
};

// Tests: F's open file again (File::Reopen) with BACKEND and SPEC's faults
// injected below the backend (refused io_uring rings, EINTR, short reads),
// for loader tests that can only wrap files already opened. The open's error if
// the backend cannot serve the file.
StatusOr<std::unique_ptr<File>> ReopenWithFaults(const File& f, Backend backend,
                                                 const FaultSpec& spec);

// Tests: a file wrapper for a loader (the FileWrapper of exec/open_files.h)
// that reopens every file it is given with ReopenWithFaults. A file that
// cannot be reopened is kept as it was and the first such error is stored
// in *ERROR (which must outlive the wrapper).
std::function<std::unique_ptr<File>(std::unique_ptr<File>, uint32_t)>
ReopeningWithFaults(Backend backend, const FaultSpec& spec, std::string* error);

}  // namespace weightlift::internal
