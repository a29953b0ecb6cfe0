// io_uring on an O_DIRECT descriptor: one ReadAt splits its range into
// pieces of IoOptions::uring_piece_bytes and keeps queue_depth of them in
// flight, so T calling threads give the device T x queue_depth requests.
//
// A ring is not thread-safe, so each File keeps a small pool of rings: a
// ReadAt takes one (creating it on first need), uses it alone and gives it
// back. The pool grows to the number of threads reading the file at once.
// Each ring has the file registered (IORING_REGISTER_FILES) so submissions
// skip the per-request fd lookup, and the loader's long-lived bounce or
// staging memory registered (IORING_REGISTER_BUFFERS) so reads into it skip
// the per-read page pinning (IORING_OP_READ_FIXED).
#include <fcntl.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "env/backends.h"
#include "env/fault_file.h"
#include "env/io_util.h"
#include "util/errno_text.h"

#if defined(WL_HAVE_URING)
#include <liburing.h>
#endif

namespace weightlift::internal {

bool UringCompiledIn() {
#if defined(WL_HAVE_URING)
  return true;
#else
  return false;
#endif
}

#if !defined(WL_HAVE_URING)

StatusOr<std::unique_ptr<File>> MakeUringFile(PosixHandle h, const IoOptions&) {
  return Status::Unsupported("uring: '" + h.path +
                             "': this build has no io_uring support "
                             "(liburing not found at build time)");
}

#else

namespace {

// Largest ring we make. Requests in flight per ReadAt are capped at the same
// number, so io_uring_get_sqe always finds a free submission entry.
constexpr int kMaxDepth = 4096;

// io_uring_submit_and_wait failures in a row, with no completion arriving in
// between, after which a ring is declared dead (see RunPieces).
constexpr int kMaxHardSubmitErrors = 100;

// One io_uring instance with the file registered at fixed index 0.
class Ring {
 public:
  // FAULTS (tests, may be null) can refuse a ring made after open (LATER).
  // BUFFERS (may be empty) are registered with the ring; a refusal leaves
  // the ring usable without them and is returned in *REGISTER_ERRNO.
  static StatusOr<std::unique_ptr<Ring>> Create(
      int fd, unsigned depth, const std::string& path,
      const FaultInjector* faults, bool later,
      const std::vector<iovec>& buffers, int* register_errno) {
    auto r = std::unique_ptr<Ring>(new Ring());
    int rc = io_uring_queue_init(depth, &r->ring_, 0);
    if (faults != nullptr && later) {
      const int filtered = faults->FilterLaterRingInit(rc);
      if (filtered < 0 && rc == 0) io_uring_queue_exit(&r->ring_);
      rc = filtered;
    }
    if (rc < 0) {
      return Status::Unsupported(
          "uring: '" + path +
          "': io_uring_queue_init refused: " + ErrnoText(-rc));
    }
    r->initialized_ = true;
    // Registration is an optimisation: without it submissions use the fd.
    r->fixed_ = io_uring_register_files(&r->ring_, &fd, 1) == 0;
    r->fd_ = fd;
    *register_errno = 0;
    if (!buffers.empty()) {
      int reg = io_uring_register_buffers(
          &r->ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
      if (faults != nullptr) {
        const int filtered = faults->FilterRegisterBuffers(reg);
        if (filtered < 0 && reg == 0) io_uring_unregister_buffers(&r->ring_);
        reg = filtered;
      }
      r->buffers_ = reg == 0;
      if (reg < 0) *register_errno = -reg;
    }
    return r;
  }
  ~Ring() {
    if (initialized_) io_uring_queue_exit(&ring_);
  }
  io_uring* get() { return &ring_; }
  bool fixed() const { return fixed_; }
  // The File's fixed_buffers are registered with this ring.
  bool buffers() const { return buffers_; }
  int fd() const { return fd_; }

 private:
  Ring() = default;
  io_uring ring_{};
  bool initialized_ = false;
  bool fixed_ = false;
  bool buffers_ = false;
  int fd_ = -1;
};

// The kernel takes at most 1 GiB per registered buffer: larger regions are
// registered as several consecutive iovecs.
constexpr size_t kMaxRegisteredBytes = size_t{1} << 30;

std::vector<iovec> RegistrationIovecs(
    const std::vector<std::span<std::byte>>& regions) {
  std::vector<iovec> out;
  for (std::span<std::byte> r : regions) {
    for (size_t at = 0; at < r.size(); at += kMaxRegisteredBytes) {
      out.push_back(
          {r.data() + at, std::min(kMaxRegisteredBytes, r.size() - at)});
    }
  }
  return out;
}

class UringFile final : public PosixFile {
 public:
  // Makes no ring: MakeUringFile makes the first with MakeRing.
  UringFile(PosixHandle h, size_t alignment, const IoOptions& options)
      : PosixFile(std::move(h)),
        alignment_(alignment),
        depth_(static_cast<unsigned>(
            std::clamp(options.queue_depth, 1, kMaxDepth))),
        // One sqe carries at most 4 GiB - 1 (a 32-bit length); stay far
        // below, as every backend does.
        piece_(std::max<uint64_t>(
            alignment, AlignUp(std::min<uint64_t>(options.uring_piece_bytes,
                                                  kMaxBytesPerSyscall),
                               alignment))),
        faults_(options.faults),
        buffers_(RegistrationIovecs(options.fixed_buffers.regions)),
        refused_(options.fixed_buffers.refused
                     ? options.fixed_buffers.refused
                     : std::make_shared<std::atomic<int>>(0)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override;
  size_t alignment() const override { return alignment_; }
  std::string_view backend_name() const override {
    return BackendName(Backend::kUring);
  }
  std::string Degraded() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    if (fallback_reads_ > 0) {
      out = std::to_string(fallback_reads_) +
            " reads went through O_DIRECT pread: no further io_uring ring (" +
            ring_refusal_ + ")";
    }
    if (register_refused_ > 0) {
      if (!out.empty()) out += "; ";
      out += "io_uring refused the registered buffers on " +
             std::to_string(register_refused_) + " ring" +
             (register_refused_ == 1 ? "" : "s") + " (" + register_refusal_ +
             "): plain reads there";
    }
    return out;
  }
  uint64_t registered_buffer_reads() const override {
    return registered_reads_.load(std::memory_order_relaxed);
  }

  // A new ring for this file, with the registered buffers unless a
  // registration was refused before (in this File or a sibling: a refusal
  // costs the whole pinning, so it is not tried again). LATER: made after
  // open (fault injection can refuse those).
  StatusOr<std::unique_ptr<Ring>> MakeRing(bool later) {
    const int earlier = refused_->load(std::memory_order_relaxed);
    int register_errno = 0;
    StatusOr<std::unique_ptr<Ring>> r = Ring::Create(
        fd(), depth_, path(), faults_.get(), later,
        earlier != 0 ? std::vector<iovec>{} : buffers_, &register_errno);
    if (r.ok()) NoteRegistration(earlier != 0 ? earlier : register_errno);
    return r;
  }
  void Release(std::unique_ptr<Ring> r) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(r));
  }

 private:
  StatusOr<std::unique_ptr<Ring>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        auto r = std::move(free_.back());
        free_.pop_back();
        return r;
      }
    }
    return MakeRing(/*later=*/true);
  }
  void NoteRegistration(int register_errno) {
    if (register_errno == 0 || buffers_.empty()) return;
    int expected = 0;
    refused_->compare_exchange_strong(expected, register_errno);
    std::lock_guard<std::mutex> lock(mu_);
    if (register_refused_++ == 0) register_refusal_ = ErrnoText(register_errno);
  }
  // Index of the registered iovec that holds [P, P + N) wholly, or -1.
  int RegisteredIndex(const std::byte* p, uint64_t n) const {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const auto* base = static_cast<const std::byte*>(buffers_[i].iov_base);
      if (p >= base && n <= buffers_[i].iov_len &&
          static_cast<size_t>(p - base) <= buffers_[i].iov_len - n) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  Status RunPieces(Ring& ring, uint64_t offset, std::span<std::byte> dst,
                   bool* ring_broken);

  size_t alignment_;
  unsigned depth_;
  uint64_t piece_;
  std::shared_ptr<FaultInjector> faults_;
  const std::vector<iovec> buffers_;  // registered with every ring
  // The first refusal's errno, shared with the loader's other Files.
  const std::shared_ptr<std::atomic<int>> refused_;
  // Read requests submitted as READ_FIXED (resubmits of a short or
  // interrupted piece count again).
  std::atomic<uint64_t> registered_reads_{0};
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Ring>> free_;
  uint64_t fallback_reads_ = 0;    // guarded by mu_
  std::string ring_refusal_;       // guarded by mu_: the first refusal
  uint64_t register_refused_ = 0;  // guarded by mu_: rings without buffers
  std::string register_refusal_;   // guarded by mu_: the first reason
};

Status UringFile::ReadAt(uint64_t offset, std::span<std::byte> dst) {
  WL_RETURN_IF_ERROR(CheckReadArgs(path(), size(), alignment_, offset, dst));
  if (dst.empty()) return Status::OK();
  StatusOr<std::unique_ptr<Ring>> acquired = Acquire();
  if (!acquired.ok()) {
    // More concurrent reads than rings the system will give us (EMFILE,
    // ENOMEM, a memlock limit): this read goes through the same O_DIRECT fd
    // with pread, so the load goes on, slower, and the report says so.
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fallback_reads_++ == 0) ring_refusal_ = acquired.status().message();
    }
    return PreadFully(fd(), path(), alignment_, offset, dst, faults_.get());
  }
  std::unique_ptr<Ring> ring = std::move(acquired).value();
  bool broken = false;
  Status s = RunPieces(*ring, offset, dst, &broken);
  if (!broken) Release(std::move(ring));
  return s;
}

Status UringFile::RunPieces(Ring& ring, uint64_t offset,
                            std::span<std::byte> dst, bool* ring_broken) {
  struct Piece {
    uint64_t start;     // from OFFSET
    uint64_t length;    // bytes requested (aligned)
    uint64_t required;  // bytes that must arrive (short only at file end)
    uint64_t done;
    uint64_t asked;  // length of the request in flight
  };
  const uint64_t need = dst.size();
  const uint64_t request = AlignUp(need, alignment_);
  std::vector<Piece> pieces;
  pieces.reserve(request / piece_ + 1);
  for (uint64_t p = 0; p < request; p += piece_) {
    const uint64_t len = std::min(piece_, request - p);
    pieces.push_back({p, len, std::min(len, need - p), 0, 0});
  }

  io_uring* r = ring.get();
  size_t next = 0;  // next piece never submitted
  unsigned inflight = 0;
  std::vector<size_t> resubmit;  // pieces to submit again (EINTR, short)
  Status first_error;
  int hard_errors = 0;  // failed submit_and_wait calls in a row

  auto queue = [&](size_t i) {
    io_uring_sqe* sqe = io_uring_get_sqe(r);
    // The ring has depth_ entries and at most depth_ are in flight, so an
    // sqe is always free here.
    Piece& pc = pieces[i];
    pc.asked = pc.length - pc.done;
    std::byte* buf = dst.data() + pc.start + pc.done;
    const uint64_t at = offset + pc.start + pc.done;
    const int fd = ring.fixed() ? 0 : ring.fd();
    const int index = ring.buffers() ? RegisteredIndex(buf, pc.asked) : -1;
    if (index >= 0) {
      io_uring_prep_read_fixed(sqe, fd, buf, static_cast<unsigned>(pc.asked),
                               at, index);
      registered_reads_.fetch_add(1, std::memory_order_relaxed);
    } else {
      io_uring_prep_read(sqe, fd, buf, static_cast<unsigned>(pc.asked), at);
    }
    if (ring.fixed()) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, i);
    ++inflight;
  };

  while (true) {
    if (first_error.ok()) {
      for (size_t i : resubmit) queue(i);
      resubmit.clear();
      while (inflight < depth_ && next < pieces.size()) queue(next++);
    }
    if (inflight == 0) break;
    int rc = io_uring_submit_and_wait(r, 1);
    if (faults_) rc = faults_->FilterSubmit(rc);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // Requests the kernel already took keep writing into DST until they
      // complete, so they are reaped before returning (the loop goes on
      // draining, submitting nothing new). Only a ring that keeps failing
      // with nothing completing is given up on: it is dropped rather than
      // reused, and its requests are left to the kernel's teardown.
      if (first_error.ok()) {
        first_error =
            Status::IoErrorFromErrno("io_uring_submit_and_wait failed: " +
                                         DescribeRange(path(), offset, need),
                                     -rc);
      }
      if (++hard_errors >= kMaxHardSubmitErrors) {
        *ring_broken = true;
        return first_error;
      }
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(r, head, cqe) {
      ++seen;
      --inflight;
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      Piece& pc = pieces[i];
      int64_t res = cqe->res;
      if (faults_) {
        res = faults_->FilterResult(offset + pc.start + pc.done, pc.asked, res);
      }
      if (!first_error.ok()) continue;  // draining after an error
      if (res == -EINTR || res == -EAGAIN) {
        resubmit.push_back(i);
        continue;
      }
      if (res < 0) {
        first_error = Status::IoErrorFromErrno(
            "io_uring read failed at offset " +
                std::to_string(offset + pc.start + pc.done) + ": " +
                DescribeRange(path(), offset, need),
            static_cast<int>(-res));
        continue;
      }
      pc.done += static_cast<uint64_t>(res);
      if (pc.done >= pc.required) continue;  // piece complete
      if (res == 0 || pc.done % alignment_ != 0) {
        // O_DIRECT comes back short and unaligned only at end of file.
        first_error = Status::IoError(
            "file ended early (truncated?): " +
            DescribeRange(path(), offset, need) + ", piece at offset " +
            std::to_string(offset + pc.start) + " got " +
            std::to_string(pc.done) + " of " + std::to_string(pc.required) +
            " bytes");
        continue;
      }
      resubmit.push_back(i);  // short but aligned: ask for the rest
    }
    io_uring_cq_advance(r, seen);
    if (seen > 0) hard_errors = 0;
  }
  return first_error;
}

}  // namespace

StatusOr<std::unique_ptr<File>> MakeUringFile(PosixHandle h,
                                              const IoOptions& options) {
  WL_ASSIGN_OR_RETURN(const size_t align,
                      DirectIoAlignmentOrRefuse(h, Backend::kUring));
  auto file = std::make_unique<UringFile>(std::move(h), align, options);
  // The first ring is made now so that a kernel refusing io_uring is
  // reported at open time (and auto mode can fall back).
  WL_ASSIGN_OR_RETURN(std::unique_ptr<Ring> ring,
                      file->MakeRing(/*later=*/false));
  file->Release(std::move(ring));
  return std::unique_ptr<File>(std::move(file));
}

#endif  // WL_HAVE_URING

}  // namespace weightlift::internal
