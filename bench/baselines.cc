#include "baselines.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "env/io_util.h"
#include "env/page_cache.h"
#include "raw_read.h"
#include "util/clock.h"
#include "util/errno_text.h"

namespace weightlift::bench {
namespace {

using internal::Clock;
using internal::SecondsSince;

// Host memory for one tensor, freed with free().
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<unsigned char, FreeDeleter>;

StatusOr<HostBuffer> Allocate(uint64_t size, const std::string& tensor) {
  // 64-byte aligned like the loader's host tensors; aligned_alloc wants a
  // multiple of the alignment.
  const uint64_t rounded = (size + 63) / 64 * 64;
  if (rounded < size) {
    return Status::ResourceExhausted("tensor '" + tensor + "' too large");
  }
  void* p = std::aligned_alloc(64, static_cast<size_t>(rounded));
  if (p == nullptr) {
    return Status::ResourceExhausted("allocating " + std::to_string(size) +
                                     " bytes for tensor '" + tensor + "'");
  }
  return HostBuffer(static_cast<unsigned char*>(p));
}

volatile unsigned g_sink = 0;

// Keeps the copies observable so the compiler cannot drop them.
void Consume(const std::vector<HostBuffer>& buffers,
             const std::vector<uint64_t>& sizes) {
  unsigned sum = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (sizes[i] > 0) sum += buffers[i].get()[sizes[i] - 1];
  }
  g_sink = g_sink + sum;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Weighted residency of PATHS, weights = file sizes.
StatusOr<double> WeightedResidency(const Checkpoint& ckpt) {
  double resident = 0, total = 0;
  for (const FileInfo& f : ckpt.files()) {
    WL_ASSIGN_OR_RETURN(internal::Residency r,
                        internal::SampleResidency(f.resolved_path));
    resident += r.fraction * static_cast<double>(f.size);
    total += static_cast<double>(f.size);
  }
  return total > 0 ? resident / total : 0.0;
}

}  // namespace

std::vector<std::string> CheckpointFiles(const Checkpoint& ckpt) {
  std::vector<std::string> paths;
  for (const FileInfo& f : ckpt.files()) {
    const std::string& p = f.open_path();
    if (std::find(paths.begin(), paths.end(), p) == paths.end()) {
      paths.push_back(p);
    }
  }
  return paths;
}

StatusOr<double> EvictCheckpoint(const Checkpoint& ckpt) {
  for (const std::string& p : CheckpointFiles(ckpt)) {
    WL_RETURN_IF_ERROR(internal::EvictFromPageCache(p));
  }
  return WeightedResidency(ckpt);
}

StatusOr<double> ResidentFraction(const Checkpoint& ckpt) {
  return WeightedResidency(ckpt);
}

Status WarmCheckpoint(const Checkpoint& ckpt) {
  const std::vector<std::string> paths = CheckpointFiles(ckpt);
  internal::RawReadOptions options;
  options.block_bytes = 8u << 20;
  WL_ASSIGN_OR_RETURN(internal::RawReadResult r,
                      internal::RawBufferedRead(paths, options));
  (void)r;
  return Status::OK();
}

namespace {

// Copies one tensor's bytes into DST (a fresh buffer of tensor.size bytes).
using FillTensor = std::function<Status(const TensorInfo&, unsigned char*)>;
// Prepares a file (open fd given) for FillTensor calls; what it sets up is
// released when the returned function is destroyed.
using OpenForFill =
    std::function<StatusOr<FillTensor>(const FileInfo&, int fd)>;

// The naive loaders' shared loop: one thread, file by file, a fresh 64-byte
// aligned host buffer per tensor, every buffer held to the end (as a
// state dict would be).
StatusOr<Timing> NaivePerTensor(const Checkpoint& ckpt, std::string method,
                                const OpenForFill& open_for_fill) {
  std::vector<HostBuffer> buffers;
  std::vector<uint64_t> sizes;
  buffers.reserve(ckpt.tensors().size());
  sizes.reserve(ckpt.tensors().size());
  Timing t;
  t.method = std::move(method);
  const auto start = Clock::now();
  for (uint32_t fi = 0; fi < ckpt.files().size(); ++fi) {
    const FileInfo& f = ckpt.files()[fi];
    Fd fd(::open(f.resolved_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      return Status::IoErrorFromErrno(f.resolved_path + ": open", errno);
    }
    if (f.size == 0) continue;
    WL_ASSIGN_OR_RETURN(FillTensor fill, open_for_fill(f, fd.get()));
    for (const TensorInfo& ti : ckpt.tensors()) {
      if (ti.file != fi) continue;
      WL_ASSIGN_OR_RETURN(HostBuffer buf, Allocate(ti.size, ti.name));
      WL_RETURN_IF_ERROR(fill(ti, buf.get()));
      buffers.push_back(std::move(buf));
      sizes.push_back(ti.size);
      t.bytes += ti.size;
    }
  }
  t.seconds = SecondsSince(start);
  Consume(buffers, sizes);
  return t;
}

}  // namespace

StatusOr<Timing> NaiveMmapCopy(const Checkpoint& ckpt) {
  return NaivePerTensor(
      ckpt, "mmap + malloc/memcpy per tensor, 1 thread",
      [](const FileInfo& f, int fd) -> StatusOr<FillTensor> {
        void* map = ::mmap(nullptr, static_cast<size_t>(f.size), PROT_READ,
                           MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
          return Status::IoErrorFromErrno(f.resolved_path + ": mmap of " +
                                              std::to_string(f.size) + " bytes",
                                          errno);
        }
        std::shared_ptr<const unsigned char> base(
            static_cast<const unsigned char*>(map),
            [size = f.size](const unsigned char* p) {
              ::munmap(const_cast<unsigned char*>(p),
                       static_cast<size_t>(size));
            });
        return FillTensor([base](const TensorInfo& ti, unsigned char* dst) {
          // Checkpoint::Open validated offset + size <= file size.
          std::memcpy(dst, base.get() + ti.offset,
                      static_cast<size_t>(ti.size));
          return Status::OK();
        });
      });
}

StatusOr<Timing> NaivePreadOneThread(const Checkpoint& ckpt) {
  return NaivePerTensor(
      ckpt, "malloc + buffered pread per tensor, 1 thread",
      [](const FileInfo& f, int fd) -> StatusOr<FillTensor> {
        return FillTensor([&f, fd](const TensorInfo& ti, unsigned char* dst) {
          uint64_t done = 0;
          while (done < ti.size) {
            const size_t want = static_cast<size_t>(
                std::min<uint64_t>(ti.size - done, 1u << 30));
            const ssize_t n = ::pread(fd, dst + done, want,
                                      static_cast<off_t>(ti.offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
              return Status::IoErrorFromErrno(
                  f.resolved_path + ": pread of tensor '" + ti.name + "' at " +
                      std::to_string(ti.offset + done) + " (" +
                      std::to_string(want) + " bytes)",
                  errno);
            }
            if (n == 0) {
              return Status::IoError(f.resolved_path + ": tensor '" + ti.name +
                                     "': end of file at " +
                                     std::to_string(ti.offset + done));
            }
            done += static_cast<uint64_t>(n);
          }
          return Status::OK();
        });
      });
}

StatusOr<Timing> StorageCeiling(const Checkpoint& ckpt) {
  // No single queue shape is best on every device: a local NVMe saturates
  // at QD16-32 with 1 MiB requests, a network-backed virtual disk wants far
  // more bytes in flight. The ceiling is the best of a few shapes, each run
  // from a cold page cache, so the loader is never compared with a strawman.
  struct Shape {
    int queue_depth;
    uint64_t block_bytes;
  };
  constexpr Shape kShapes[] = {{32, 1u << 20}, {64, 4u << 20}};
  const std::vector<std::string> paths = CheckpointFiles(ckpt);
  std::optional<Timing> best;
  for (const Shape& shape : kShapes) {
    for (const std::string& p : paths) {
      WL_RETURN_IF_ERROR(internal::EvictFromPageCache(p));
    }
    internal::RawReadOptions options;
    options.queue_depth = shape.queue_depth;
    options.block_bytes = shape.block_bytes;
    WL_ASSIGN_OR_RETURN(internal::RawReadResult r,
                        internal::RawDirectRead(paths, options));
    Timing t{r.bytes, r.seconds, r.method + " (best of 2 queue shapes)"};
    if (!best || t.seconds < best->seconds) best = t;
  }
  return *best;
}

StatusOr<AnonymousMemory> AnonymousMemory::Map(uint64_t bytes,
                                               const std::string& what) {
  AnonymousMemory m;
  m.bytes_ = std::max<uint64_t>(bytes, 1);
  void* p = ::mmap(nullptr, m.bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    return Status::ResourceExhausted(
        what + ": mmap of " + std::to_string(m.bytes_) +
        " bytes of new memory: " + internal::ErrnoText(e));
  }
  m.data_ = static_cast<std::byte*>(p);
  return m;
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

AnonymousMemory::~AnonymousMemory() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

StatusOr<Timing> FreshMemoryCeiling(uint64_t bytes) {
  Timing t;
  t.bytes = bytes;
  if (bytes == 0) return t;
  const auto start = Clock::now();
  WL_ASSIGN_OR_RETURN(AnonymousMemory m,
                      AnonymousMemory::Map(bytes, "fresh memory ceiling"));
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (::madvise(m.data(), bytes, MADV_POPULATE_WRITE) == 0) {
    t.method = "mmap + MADV_POPULATE_WRITE";
  } else {
    const long page = ::sysconf(_SC_PAGESIZE);
    auto* b = reinterpret_cast<volatile char*>(m.data());
    for (uint64_t i = 0; i < bytes; i += static_cast<uint64_t>(page)) b[i] = 0;
    t.method = "mmap + one write per page";
  }
  t.seconds = SecondsSince(start);
  return t;  // M is given back after the clock stopped
}

namespace {

// Where one file's bytes go: given the file's path and size, a destination
// of at least that many bytes, or the reason there is none.
using FileDestination =
    std::function<StatusOr<std::byte*>(const std::string& path, uint64_t)>;

// One thread reads every file of CKPT from start to end (buffered pread,
// 8 MiB pieces) into the destination DEST_FOR gives it; returns the bytes.
StatusOr<uint64_t> ReadFilesInOrder(const Checkpoint& ckpt,
                                    const FileDestination& dest_for) {
  constexpr uint64_t kPiece = 8u << 20;
  uint64_t total = 0;
  for (const std::string& path : CheckpointFiles(ckpt)) {
    WL_ASSIGN_OR_RETURN(internal::UniqueFd fd,
                        internal::OpenReadOnly(path, 0, "sequential read"));
    WL_ASSIGN_OR_RETURN(uint64_t size, internal::FdSize(fd.get(), path));
    if (size == 0) continue;
    WL_ASSIGN_OR_RETURN(std::byte * dst, dest_for(path, size));
    for (uint64_t off = 0; off < size; off += kPiece) {
      const uint64_t n = std::min(kPiece, size - off);
      WL_RETURN_IF_ERROR(internal::PreadFully(fd.get(), path, 1, off,
                                              {dst + off, n}, nullptr));
    }
    total += size;
  }
  return total;
}

}  // namespace

StatusOr<Timing> SequentialReadInto(const Checkpoint& ckpt, std::byte* dst,
                                    uint64_t dst_bytes) {
  const auto start = Clock::now();
  uint64_t at = 0;
  WL_ASSIGN_OR_RETURN(
      uint64_t total,
      ReadFilesInOrder(
          ckpt,
          [&](const std::string& path, uint64_t size) -> StatusOr<std::byte*> {
            if (size > dst_bytes - at) {
              return Status::InvalidArgument(
                  path + ": destination of " + std::to_string(dst_bytes) +
                  " bytes is smaller than the files");
            }
            std::byte* here = dst + at;
            at += size;
            return here;
          }));
  return Timing{total, SecondsSince(start),
                "buffered pread, 1 thread, 8 MiB pieces, into touched memory"};
}

StatusOr<Timing> SequentialReadFresh(const Checkpoint& ckpt) {
  std::vector<AnonymousMemory> kept;  // held to the end, as a load holds
  const auto start = Clock::now();
  WL_ASSIGN_OR_RETURN(
      uint64_t total,
      ReadFilesInOrder(
          ckpt,
          [&](const std::string& path, uint64_t size) -> StatusOr<std::byte*> {
            WL_ASSIGN_OR_RETURN(
                AnonymousMemory m,
                AnonymousMemory::Map(size, path + ": sequential read"));
            kept.push_back(std::move(m));
            return kept.back().data();
          }));
  return Timing{total, SecondsSince(start),
                "buffered pread, 1 thread, 8 MiB pieces, into a new buffer "
                "per file"};
}

StatusOr<Timing> PageCacheCeiling(const Checkpoint& ckpt, int threads) {
  internal::RawReadOptions options;
  options.threads = std::max(1, threads);
  options.block_bytes = 8u << 20;
  const std::vector<std::string> paths = CheckpointFiles(ckpt);
  WL_ASSIGN_OR_RETURN(internal::RawReadResult r,
                      internal::RawBufferedRead(paths, options));
  return Timing{r.bytes, r.seconds, r.method};
}

}  // namespace weightlift::bench
