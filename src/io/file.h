// File: one open, read-only checkpoint file served by one I/O backend.
//
// The interface every backend implements (pread, O_DIRECT, io_uring, mmap,
// in-memory, fault-injecting). Small on purpose: the executor only needs to
// read exact ranges from many threads at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::internal {

class File {
 public:
  virtual ~File() = default;

  // Reads exactly dst.size() bytes starting at OFFSET into DST. Loops over
  // short reads and EINTR; never asks one system call for more than 2 GiB.
  // A read that ends early (EOF, truncated file) is an IoError naming the
  // file, offset, length and how many bytes arrived.
  // REQUIRES when alignment() > 1: OFFSET, dst.data() and dst.size() are
  //   multiples of alignment(), except that dst.size() may end exactly at
  //   size(); then DST must have room up to the next multiple of alignment().
  // Thread-safe: concurrent ReadAt calls on one File are allowed.
  virtual Status ReadAt(uint64_t offset, std::span<std::byte> dst) = 0;

  // Size in bytes when opened.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // 1 for buffered backends; the logical block size (e.g. 4096) for O_DIRECT.
  virtual size_t alignment() const { return 1; }
  // "pread", "direct", "uring", "mmap", "memory", ...
  virtual std::string_view backend_name() const = 0;
  // What the backend had to do differently from its name since it was
  // opened (e.g. reads served by a fallback), one line for a load report;
  // empty when nothing. Thread-safe.
  virtual std::string Degraded() const { return {}; }
  // io_uring: reads that landed in a registered buffer (IoOptions::
  // fixed_buffers) through IORING_OP_READ_FIXED; 0 for other backends.
  virtual uint64_t registered_buffer_reads() const { return 0; }
};

// The backends are the public weightlift::Backend (options.h), one enum
// from the options to the file; OpenFile serves every value but kAuto.

class FaultInjector;  // io/fault_file.h

// io_uring: long-lived memory that reads often land in (a loader's bounce
// or staging ring), registered with every ring a File makes
// (io_uring_register_buffers). A read piece wholly inside one region is
// submitted as IORING_OP_READ_FIXED, so the kernel does not pin and unpin
// its pages per read. REGIONS must stay mapped for the Files' whole life.
// If the kernel refuses the registration (a memlock limit, a mapping it
// cannot pin), reads go the plain way and Degraded() says why.
struct FixedBuffers {
  std::vector<std::span<std::byte>> regions;
  // Shared by the Files of one loader (may be null: then per File). 0 until
  // a registration is refused, then its errno. A refusal costs the full
  // pinning before it fails, so later rings do not try again.
  std::shared_ptr<std::atomic<int>> refused;
};

struct IoOptions {
  int queue_depth = 16;  // io_uring: reads in flight per ReadAt
  size_t uring_piece_bytes = 512u << 10;  // io_uring: split reads this size
  // Tests only: injects short reads, EINTR and EIO below the backends' retry
  // loops (pread, direct and uring; ignored by mmap).
  std::shared_ptr<FaultInjector> faults;
  // io_uring: memory registered with the rings (see FixedBuffers).
  FixedBuffers fixed_buffers;
};

// Opens PATH with BACKEND (kPread, kDirect, kUring or kMmap: kAuto is
// chosen per file by the caller and is InvalidArgument here). Unsupported (with
// the reason) when the backend cannot serve the file: liburing not compiled in,
// io_uring_setup refused by the kernel, O_DIRECT refused by the file system.
StatusOr<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         Backend backend,
                                         const IoOptions& options = {});

// True when this build has io_uring support compiled in.
bool UringCompiledIn();

}  // namespace weightlift::internal
