// File: one open, read-only file of a checkpoint, read through one backend.
//
// The storage layer's unit of reading (see env.h for how Files are made).
// Every implementation (POSIX pread, O_DIRECT, io_uring, mmap; memory; the
// fault-injecting wrapper; object storage) offers: a positioned read of exact
// ranges from many threads at once, the identity the file had when it was
// opened (to notice a change under a load), a fresh look at that identity,
// a view of the same open file through another backend, and, where the
// storage allows, a mapping.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "env/mapping.h"
#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// What makes "the same file": a change in any field means the bytes may have
// changed since it was opened. POSIX fills device, inode, mtime_ns and size;
// object storage fills size and etag (its version or ETag) and leaves the rest
// 0.
struct FileIdentity {
  uint64_t device = 0;   // st_dev
  uint64_t inode = 0;    // st_ino
  int64_t mtime_ns = 0;  // st_mtim in nanoseconds
  uint64_t size = 0;
  std::string etag;

  bool operator==(const FileIdentity&) const = default;
  // "dev 2049 ino 1234 mtime_ns 1700000000123456789 size 4096" (+ etag).
  std::string ToString() const;
};

// Empty when BEFORE and NOW are the same file; else what changed, for an
// error message: "size 4096 -> 100", "replaced (inode 12 -> 15)",
// "modified (mtime ...)", "etag "a" -> "b"".
std::string DescribeIdentityChange(const FileIdentity& before,
                                   const FileIdentity& now);

// The ways a local file can be read are weightlift::Backend
// (include/weightlift/options.h, one enum and one name mapping for the whole
// library): pread, direct, uring, mmap (src/env/posix_*.cc). kAuto is a
// loader's choice made per file (src/exec/open_files.cc) before it asks the
// Env; an Env or File given kAuto answers InvalidArgument. Object storage
// serves every backend with its own reads and says so in backend_name().

class FaultInjector;  // env/fault_file.h

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
  // loops (pread, direct and uring; mmap has no system call to fail).
  std::shared_ptr<FaultInjector> faults;
  // io_uring: memory registered with the rings (see FixedBuffers).
  FixedBuffers fixed_buffers;
};

// How File::Map maps: shared read-only (page-cache pages, what the mmap
// backend and host registration use), or private copy-on-write (writable
// pages a zero-copy load hands out as tensors without changing the file).
enum class MapAccess { kReadShared, kPrivateWritable };

// One O_DIRECT read of a local disk, in bytes it could have moved instead:
// a device's bandwidth over its reads per second. NVMe: about 6-8 KiB (3-7
// GB/s, 0.5-1 M reads/s); the development VM's disk: about 46 KiB (0.6
// GB/s, 13k reads/s at 16 in flight); network block storage more. With it, a
// tensor-parallel rank's row-parallel parts (1-4 KiB runs 8 KiB apart for a
// Llama-2 at n = 8..2) are one covering read per chunk instead of a read per
// row: on the development VM, rank 0 of 8 of TinyLlama-1.1B from a cold
// disk took 8.5 s that way against 5.1 s for the whole checkpoint.
inline constexpr uint64_t kDirectReadCostBytes = 32u << 10;
// One request to object storage (an HTTP range GET: a round trip of
// milliseconds at tens to hundreds of MB/s per connection). A local
// SeaweedFS served rank 0 of 8 of the tiny layout's 1024 row runs in 2.5 s
// against 63 ms for the whole checkpoint.
inline constexpr uint64_t kObjectReadCostBytes = 1u << 20;

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

  // Reads ROWS runs of WIDTH bytes, the first at OFFSET and each PITCH
  // bytes after the one before, packed back to back into DST (ROWS * WIDTH
  // bytes): a slice's row runs. The default is one ReadAt per run, so its
  // errors are ReadAt's (file, offset, length); a File that can copy the
  // runs more cheaply (out of a mapping of the page cache,
  // env/mapped_rows_file.h) overrides it with the same contract.
  // REQUIRES: PITCH >= WIDTH when ROWS > 1; the runs meet ReadAt's
  //   alignment rule.
  // Thread-safe as ReadAt.
  virtual Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                          uint64_t rows, std::byte* dst);

  // The file's identity now (fstat; a HEAD for object storage), to compare
  // with identity(): a file changed in place shows a new size or mtime.
  // Thread-safe.
  virtual StatusOr<FileIdentity> Stat() const = 0;

  // The same open file read through BACKEND with OPTIONS, as a new File that
  // does not depend on this one. POSIX shares the open file where the
  // backend allows (pread, mmap: a dup of the descriptor) and otherwise
  // opens it again through /proc/self/fd (O_DIRECT) and checks that it is
  // the same file (identity), so a file renamed over the path since it was
  // opened is never read by mistake. Unsupported (with the reason) when the
  // backend cannot serve it: liburing not compiled in, io_uring refused by
  // the kernel, O_DIRECT refused by the file system.
  virtual StatusOr<std::unique_ptr<File>> Reopen(
      Backend backend, const IoOptions& options) const = 0;

  // Maps [OFFSET, OFFSET + LENGTH) of the file; Unsupported where the
  // storage cannot be mapped (object storage, a file system without mmap).
  // The mapping outlives the File. A file that shrinks under a mapping
  // turns reads of the lost pages into SIGBUS: callers check Stat() first.
  virtual StatusOr<Mapping> Map(uint64_t offset, uint64_t length,
                                MapAccess access) const;

  // Accessors.
  // Where the file was opened ("/data/model.safetensors", "s3://b/k").
  virtual const std::string& path() const = 0;
  // The identity when opened; size() is identity().size.
  virtual const FileIdentity& identity() const = 0;
  uint64_t size() const { return identity().size; }
  // 1 for buffered backends; the logical block size (e.g. 4096) for O_DIRECT.
  virtual size_t alignment() const { return 1; }
  // "pread", "direct", "uring", "mmap", "memory", ...
  virtual std::string_view backend_name() const = 0;
  // The POSIX descriptor, for the few kernel interfaces that need one
  // (cuFile registration, mincore residency sampling); -1 when the File
  // has none (memory, object storage). Owned by the File.
  virtual int native_fd() const { return -1; }
  // What the backend had to do differently from its name since it was
  // opened (e.g. reads served by a fallback), one line for a load report;
  // empty when nothing. Thread-safe.
  virtual std::string Degraded() const { return {}; }
  // io_uring: reads that landed in a registered buffer (IoOptions::
  // fixed_buffers) through IORING_OP_READ_FIXED; 0 for other backends.
  virtual uint64_t registered_buffer_reads() const { return 0; }
  // Row runs copied out of a mapping of the page cache instead of read
  // (env/mapped_rows_file.h), and the strided reads they came in; zeros
  // for other files. Thread-safe.
  struct CopiedRows {
    uint64_t runs = 0;
    uint64_t reads = 0;
  };
  virtual CopiedRows copied_rows() const { return {}; }
  // What one more read costs, in bytes moved: how the slice planner weighs
  // a slice's row runs (one read each) against a covering read
  // (PlaceOptions::read_cost_bytes). 0 where reads are memory copies (the
  // page cache: buffered, mmap; memory); kDirectReadCostBytes under O_DIRECT
  // (alignment() > 1) and for buffered reads of a file whose pages are not
  // resident (env/cold_file.h, applied by the loader); object storage says
  // its own.
  virtual uint64_t read_cost_bytes() const {
    return alignment() > 1 ? kDirectReadCostBytes : 0;
  }
};

// OK when F's identity now (F.Stat()) is the one it was opened with; else an
// IoError naming the file and what changed ("changed since it was opened").
Status CheckUnchanged(const File& f);

// True when this build has io_uring support compiled in.
bool UringCompiledIn();

}  // namespace weightlift::internal
