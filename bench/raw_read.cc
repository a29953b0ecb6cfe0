#include "raw_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "env/backends.h"
#include "env/io_util.h"
#include "util/clock.h"

#if defined(WL_HAVE_URING)
#include <liburing.h>
#endif

namespace weightlift::internal {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

StatusOr<std::unique_ptr<std::byte, FreeDeleter>> AlignedBuffer(uint64_t n) {
  void* p = std::aligned_alloc(4096, AlignUp(std::max<uint64_t>(n, 1), 4096));
  if (p == nullptr) {
    return Status::ResourceExhausted("raw read: cannot allocate " +
                                     std::to_string(n) + " bytes");
  }
  return std::unique_ptr<std::byte, FreeDeleter>(static_cast<std::byte*>(p));
}

std::string Mib(uint64_t b) {
  return b % (1u << 20) == 0 ? std::to_string(b >> 20) + " MiB"
                             : std::to_string(b >> 10) + " KiB";
}

// One block of one file.
struct Block {
  int fd;
  const std::string* path;
  uint64_t offset;
  uint64_t length;    // aligned request
  uint64_t required;  // bytes that must come back
};

std::vector<Block> MakeBlocks(const std::vector<UniqueFd>& fds,
                              std::span<const std::string> paths,
                              const std::vector<uint64_t>& sizes,
                              uint64_t block) {
  std::vector<Block> blocks;
  for (size_t f = 0; f < fds.size(); ++f) {
    for (uint64_t off = 0; off < sizes[f]; off += block) {
      const uint64_t req = std::min(block, sizes[f] - off);
      blocks.push_back({fds[f].get(), &paths[f], off, AlignUp(req, 4096), req});
    }
  }
  return blocks;
}

// Fallback for builds or kernels without io_uring: THREADS synchronous
// O_DIRECT readers pulling blocks from a shared counter.
Status DirectPreadAll(const std::vector<Block>& blocks, int threads,
                      uint64_t block) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<Status> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto buf = AlignedBuffer(block);
      if (!buf.ok()) {
        errors[t] = buf.status();
        failed = true;
        return;
      }
      while (!failed) {
        const size_t i = next.fetch_add(1);
        if (i >= blocks.size()) break;
        const Block& b = blocks[i];
        Status s = PreadFully(b.fd, *b.path, 4096, b.offset,
                              {buf->get(), b.required}, nullptr);
        if (!s.ok()) {
          errors[t] = s;
          failed = true;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors) WL_RETURN_IF_ERROR(e);
  return Status::OK();
}

#if defined(WL_HAVE_URING)
// Keeps QD blocks in flight on one ring, each into its own buffer slot.
Status UringReadAll(const std::vector<Block>& blocks, unsigned qd,
                    uint64_t block, bool* refused, std::string* why) {
  // The arena comes first: every return after io_uring_queue_init must go
  // through io_uring_queue_exit, or the ring's descriptor leaks.
  WL_ASSIGN_OR_RETURN(auto arena, AlignedBuffer(block * qd));
  io_uring ring;
  int rc = io_uring_queue_init(qd, &ring, 0);
  if (rc < 0) {
    *refused = true;
    *why = std::string("io_uring_queue_init refused: ") + std::strerror(-rc);
    return Status::Unsupported(*why);
  }
  std::vector<unsigned> free_slots;
  for (unsigned s = 0; s < qd; ++s) free_slots.push_back(s);
  std::vector<size_t> slot_block(qd);
  size_t next = 0;
  unsigned inflight = 0;
  Status status;
  int hard_errors = 0;  // failed submit_and_wait calls in a row
  while (true) {
    while (status.ok() && !free_slots.empty() && next < blocks.size()) {
      const unsigned slot = free_slots.back();
      free_slots.pop_back();
      const Block& b = blocks[next];
      slot_block[slot] = next++;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, b.fd, arena.get() + slot * block,
                         static_cast<unsigned>(b.length), b.offset);
      io_uring_sqe_set_data64(sqe, slot);
      ++inflight;
    }
    if (inflight == 0) break;
    rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // Reads already taken by the kernel write into ARENA until they
      // complete: keep draining (submitting nothing new) so the arena is not
      // freed under them, unless the ring keeps failing with nothing
      // completing.
      if (status.ok()) {
        status =
            Status::IoErrorFromErrno("raw read: io_uring_submit_and_wait", -rc);
      }
      if (++hard_errors >= 100) break;
    }
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      --inflight;
      const unsigned slot = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
      const Block& b = blocks[slot_block[slot]];
      if (status.ok() &&
          (cqe->res < 0 || static_cast<uint64_t>(cqe->res) < b.required)) {
        // Raw reads are whole aligned blocks; a short one means the file
        // changed under us. Good enough for a ceiling measurement.
        status =
            cqe->res < 0
                ? Status::IoErrorFromErrno(
                      "raw read: " + DescribeRange(*b.path, b.offset, b.length),
                      -cqe->res)
                : Status::IoError("raw read: short read: " +
                                  DescribeRange(*b.path, b.offset, b.length));
      }
      free_slots.push_back(slot);
    }
    io_uring_cq_advance(&ring, seen);
    if (seen > 0) hard_errors = 0;
  }
  io_uring_queue_exit(&ring);
  return status;
}
#endif

}  // namespace

StatusOr<RawReadResult> RawDirectRead(std::span<const std::string> paths,
                                      const RawReadOptions& options) {
  const uint64_t block =
      AlignUp(std::max<uint64_t>(options.block_bytes, 4096), 4096);
  const unsigned qd =
      static_cast<unsigned>(std::clamp(options.queue_depth, 1, 1024));
  RawReadResult result;
  const auto t0 = Clock::now();
  std::vector<UniqueFd> fds;
  std::vector<uint64_t> sizes;
  for (const std::string& p : paths) {
    WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(p, O_DIRECT, "raw read"));
    WL_ASSIGN_OR_RETURN(uint64_t size, FdSize(fd.get(), p));
    result.bytes += size;
    sizes.push_back(size);
    fds.push_back(std::move(fd));
  }
  const std::vector<Block> blocks = MakeBlocks(fds, paths, sizes, block);
  std::string why = "io_uring not compiled in";
#if defined(WL_HAVE_URING)
  bool refused = false;
  Status s = UringReadAll(blocks, qd, block, &refused, &why);
  if (!refused) {
    WL_RETURN_IF_ERROR(s);
    result.seconds = SecondsSince(t0);
    result.method =
        "O_DIRECT io_uring QD" + std::to_string(qd) + " " + Mib(block);
    return result;
  }
#endif
  WL_RETURN_IF_ERROR(DirectPreadAll(blocks, static_cast<int>(qd), block));
  result.seconds = SecondsSince(t0);
  result.method = "O_DIRECT pread x" + std::to_string(qd) + " threads " +
                  Mib(block) + " (" + why + ")";
  return result;
}

StatusOr<RawReadResult> RawBufferedRead(std::span<const std::string> paths,
                                        const RawReadOptions& options) {
  const uint64_t block = std::max<uint64_t>(options.block_bytes, 4096);
  const int threads = std::clamp(options.threads, 1, 256);
  RawReadResult result;
  std::vector<UniqueFd> fds;
  std::vector<uint64_t> sizes;
  for (const std::string& p : paths) {
    WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(p, 0, "raw read"));
    WL_ASSIGN_OR_RETURN(uint64_t size, FdSize(fd.get(), p));
    result.bytes += size;
    sizes.push_back(size);
    fds.push_back(std::move(fd));
  }
  // Each thread reads one contiguous share of every file, sequentially.
  std::vector<Status> errors(threads);
  const uint64_t target =
      std::max<uint64_t>(block, AlignUp(options.target_bytes, block));
  std::vector<std::unique_ptr<std::byte, FreeDeleter>> bufs;
  for (int t = 0; t < threads; ++t) {
    WL_ASSIGN_OR_RETURN(auto buf, AlignedBuffer(target));
    // Touch it first: page faults are not what this measures.
    std::memset(buf.get(), 0, target);
    bufs.push_back(std::move(buf));
  }
  const auto t0 = Clock::now();
  auto work = [&](int t) {
    std::byte* buf = bufs[t].get();
    uint64_t cursor = 0;
    for (size_t f = 0; f < fds.size(); ++f) {
      const uint64_t share = AlignUp((sizes[f] + threads - 1) / threads, 4096);
      const uint64_t begin = std::min(sizes[f], share * t);
      const uint64_t end = std::min(sizes[f], begin + share);
      for (uint64_t off = begin; off < end; off += block) {
        const uint64_t n = std::min(block, end - off);
        if (cursor + n > target) cursor = 0;
        Status s = PreadFully(fds[f].get(), paths[f], 1, off, {buf + cursor, n},
                              nullptr);
        cursor += n;
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
      }
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  for (auto& e : errors) WL_RETURN_IF_ERROR(e);
  result.seconds = SecondsSince(t0);
  result.method = "buffered pread x" + std::to_string(threads) + " " +
                  Mib(block) +
                  (target > block ? " into " + Mib(target) : std::string());
  return result;
}

}  // namespace weightlift::internal
