// The backend suite: every File backend (pread, O_DIRECT, io_uring, mmap,
// memory) passes the same tests on real files in a temporary directory.
// Unaligned ranges on O_DIRECT backends go through the planner and the host
// executor, the path a load takes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "env/backends.h"
#include "env/env.h"
#include "env/fault_file.h"
#include "env/file.h"
#include "env/memory_file.h"
#include "env/testing/temp_dir.h"
#include "exec/host_sink.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFileOrDie;

enum class Kind { kPread, kDirect, kUring, kMmap, kMemory };

std::string KindName(Kind k) {
  switch (k) {
    case Kind::kPread:
      return "pread";
    case Kind::kDirect:
      return "direct";
    case Kind::kUring:
      return "uring";
    case Kind::kMmap:
      return "mmap";
    case Kind::kMemory:
      return "memory";
  }
  return "?";
}

// Page-aligned buffer of at least N bytes (plus alignment slack at the end),
// from an anonymous mapping (so multi-GiB buffers are cheap until touched).
class Buffer {
 public:
  explicit Buffer(uint64_t n) : size_((n + 8191) / 4096 * 4096) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) std::abort();
    data_ = static_cast<std::byte*>(p);
  }
  ~Buffer() { ::munmap(data_, size_); }
  std::byte* data() { return data_; }

 private:
  uint64_t size_;
  std::byte* data_;
};

// A file of SIZE random bytes (from SEED) in a fresh temporary folder, and
// its bytes to compare reads with.
struct RandomTestFile {
  RandomTestFile(const char* name, uint64_t size, uint64_t seed)
      : path(dir.File(name)), bytes(RandomBytes(size, seed)) {
    WriteFileOrDie(path, bytes);
  }
  TempDir dir;
  const std::string path;
  const std::vector<std::byte> bytes;
};

class BackendTest : public ::testing::TestWithParam<Kind> {
 protected:
  // Opens PATH with the backend under test; skips when the backend cannot
  // run here (io_uring not compiled in or refused by the kernel).
  std::unique_ptr<File> Open(const std::string& path,
                             const IoOptions& io = {}) {
    StatusOr<std::unique_ptr<File>> f = Status::Internal("unset");
    switch (GetParam()) {
      case Kind::kPread:
        f = OpenFile(path, Backend::kPread, io);
        break;
      case Kind::kDirect:
        f = OpenFile(path, Backend::kDirect, io);
        break;
      case Kind::kUring:
        f = OpenFile(path, Backend::kUring, io);
        break;
      case Kind::kMmap:
        f = OpenFile(path, Backend::kMmap, io);
        break;
      case Kind::kMemory:
        return std::make_unique<MemoryFile>(path, testing::ReadFileOrDie(path));
    }
    if (!f.ok() && f.status().code() == StatusCode::kUnsupported) {
      skipped_ = f.status().ToString();
      return nullptr;
    }
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }
  bool Syscalls() const {
    return GetParam() == Kind::kPread || GetParam() == Kind::kDirect ||
           GetParam() == Kind::kUring;
  }

  // Reads [OFF, OFF+LEN) of F into DST the way a load does: MakePlan +
  // RunHostPlan, so O_DIRECT backends get aligned interiors and bounced
  // edges.
  Status ReadViaExecutor(File& f, uint64_t off, uint64_t len, std::byte* dst) {
    Segment seg{0, off, len, reinterpret_cast<uintptr_t>(dst), 0};
    PlanFile pf{f.size(), f.alignment(), true};
    PlanOptions po;
    po.chunk_bytes = 256 << 10;
    po.direct_min_bytes = 64 << 10;
    Plan plan = MakePlan({&seg, 1}, {&pf, 1}, 1, po);
    auto bounce = BouncePool::Create(1 << 20, 256 << 10);
    if (!bounce.ok()) return bounce.status();
    File* files[] = {&f};
    return RunHostPlan(plan, files, pool_, **bounce);
  }

  TempDir dir_;
  ThreadPool pool_{3};
  std::string skipped_;
};

#define OPEN_OR_SKIP(var, ...)                       \
  auto var = Open(__VA_ARGS__);                      \
  if (!var) {                                        \
    if (!skipped_.empty()) GTEST_SKIP() << skipped_; \
    return;                                          \
  }

TEST_P(BackendTest, ReportsSizePathAndName) {
  const std::string p = dir_.File("f");
  WriteFileOrDie(p, RandomBytes(12345, 1));
  OPEN_OR_SKIP(f, p);
  EXPECT_EQ(f->size(), 12345u);
  EXPECT_EQ(f->path(), p);
  EXPECT_EQ(f->backend_name(), KindName(GetParam()));
  if (GetParam() == Kind::kDirect || GetParam() == Kind::kUring) {
    EXPECT_GE(f->alignment(), 512u);
    EXPECT_EQ(f->alignment() & (f->alignment() - 1), 0u);
  } else {
    EXPECT_EQ(f->alignment(), 1u);
  }
}

TEST_P(BackendTest, RandomAlignedRangesReadExactBytes) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 3; ++round) {
    const uint64_t size = 3 * 1024 * 1024 + rng() % 100000;
    const auto bytes = RandomBytes(size, round + 10);
    const std::string p = dir_.File("r" + std::to_string(round));
    WriteFileOrDie(p, bytes);
    OPEN_OR_SKIP(f, p);
    const uint64_t a = f->alignment();
    Buffer buf(size + a);
    for (int i = 0; i < 60; ++i) {
      uint64_t off = rng() % size / a * a;
      uint64_t len = rng() % 2 == 0
                         ? rng() % (size - off + 1)
                         : rng() % std::min<uint64_t>(size - off + 1, 70000);
      // Aligned length unless the range ends at the end of the file.
      if (len % a != 0 && off + len != size) len = len / a * a;
      if (i == 0) {  // the tail block, ending exactly at EOF
        off = (size - 1) / a * a;
        len = size - off;
      }
      Status s = f->ReadAt(off, {buf.data(), len});
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_EQ(std::memcmp(buf.data(), bytes.data() + off, len), 0)
          << "off " << off << " len " << len;
    }
  }
}

TEST_P(BackendTest, UnalignedRangesThroughExecutor) {
  const uint64_t size = 2 * 1024 * 1024 + 777;
  const auto bytes = RandomBytes(size, 3);
  const std::string p = dir_.File("u");
  WriteFileOrDie(p, bytes);
  OPEN_OR_SKIP(f, p);
  std::mt19937_64 rng(11);
  Buffer buf(size + 8192);
  for (int i = 0; i < 80; ++i) {
    const uint64_t off = rng() % size;
    const uint64_t len = rng() % (size - off + 1);
    // Destination congruent to the file offset half the time (direct
    // interior), arbitrary otherwise (all bounce).
    const uint64_t phase = rng() % 2 == 0 ? off % 4096 : rng() % 4096;
    std::byte* dst = buf.data() + phase;
    std::memset(buf.data(), 0xAB, size + 4096);
    Status s = ReadViaExecutor(*f, off, len, dst);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(std::memcmp(dst, bytes.data() + off, len), 0)
        << "off " << off << " len " << len << " phase " << phase;
    // Nothing written outside the destination.
    for (uint64_t j = 0; j < phase; ++j)
      ASSERT_EQ(buf.data()[j], std::byte{0xAB});
    for (uint64_t j = 0; j < 64 && phase + len + j < size + 4096; ++j) {
      ASSERT_EQ(dst[len + j], std::byte{0xAB}) << "stray write after the end";
    }
  }
}

TEST_P(BackendTest, ConcurrentReadersOnOneFile) {
  const uint64_t size = 4 * 1024 * 1024;
  const auto bytes = RandomBytes(size, 5);
  const std::string p = dir_.File("c");
  WriteFileOrDie(p, bytes);
  OPEN_OR_SKIP(f, p);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Buffer buf(256 * 1024);
      std::mt19937_64 rng(t);
      for (int i = 0; i < 40; ++i) {
        const uint64_t off = rng() % (size / 4096 - 64) * 4096;
        if (!f->ReadAt(off, {buf.data(), 256 * 1024}).ok() ||
            std::memcmp(buf.data(), bytes.data() + off, 256 * 1024) != 0) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The backends that read the file itself (not the memory backend, which
// would need a 2 GiB copy of it): instantiated below for those only, so no
// case skips.
class FileBackendTest : public BackendTest {};

TEST_P(FileBackendTest, RangeOverTwoGiB) {
  // Sparse: 2 GiB + 5 MiB + 123 bytes, real data only near the edges and
  // across the 2 GiB mark, so the test costs little disk.
  const uint64_t size = (uint64_t{2} << 30) + (5 << 20) + 123;
  const std::string p = dir_.File("big");
  const auto head = RandomBytes(1 << 20, 21);
  const auto mid = RandomBytes(1 << 20, 22);
  const auto tail = RandomBytes(777, 23);
  const uint64_t mid_at = (uint64_t{2} << 30) - (512 << 10);
  {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), (ssize_t)head.size());
    ASSERT_EQ(::pwrite(fd, mid.data(), mid.size(), mid_at),
              (ssize_t)mid.size());
    ASSERT_EQ(::pwrite(fd, tail.data(), tail.size(), size - tail.size()),
              (ssize_t)tail.size());
    ::close(fd);
  }
  OPEN_OR_SKIP(f, p);
  ASSERT_EQ(f->size(), size);
  // One ReadAt of the whole file: more than 2 GiB in one call.
  Buffer buf(size + 4096);
  Status s = f->ReadAt(0, {buf.data(), size});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(buf.data(), head.data(), head.size()), 0);
  EXPECT_EQ(std::memcmp(buf.data() + mid_at, mid.data(), mid.size()), 0);
  EXPECT_EQ(
      std::memcmp(buf.data() + size - tail.size(), tail.data(), tail.size()),
      0);
  EXPECT_EQ(buf.data()[head.size() + 12345], std::byte{0});  // a hole
}

// The backends with system calls below them, where short reads and EINTR
// can happen: instantiated below for those only.
class SyscallBackendTest : public BackendTest {};

TEST_P(SyscallBackendTest, ShortReadsAndEintrAreRetried) {
  const uint64_t size = 1024 * 1024 + 4096 * 3 + 99;
  const auto bytes = RandomBytes(size, 31);
  const std::string p = dir_.File("s");
  WriteFileOrDie(p, bytes);
  FaultSpec spec;
  spec.max_bytes_per_call = 4096 * 5;  // aligned, as the kernel's would be
  spec.eintr_every = 3;
  IoOptions io;
  io.faults = std::make_shared<FaultInjector>(spec);
  io.uring_piece_bytes = 64 << 10;
  OPEN_OR_SKIP(f, p, io);
  Buffer buf(size + 4096);
  Status s = f->ReadAt(0, {buf.data(), size});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(buf.data(), bytes.data(), size), 0);
  EXPECT_GT(io.faults->short_injected(), 0u);
  EXPECT_GT(io.faults->eintr_injected(), 0u);
  if (GetParam() == Kind::kPread) {
    // Buffered reads may come back short at any byte count.
    FaultSpec odd;
    odd.max_bytes_per_call = 1000;
    odd.eintr_every = 2;
    IoOptions io2;
    io2.faults = std::make_shared<FaultInjector>(odd);
    auto g = Open(p, io2);
    ASSERT_TRUE(g);
    std::vector<std::byte> out(50001);
    ASSERT_TRUE(g->ReadAt(123, out).ok());
    EXPECT_EQ(std::memcmp(out.data(), bytes.data() + 123, out.size()), 0);
  }
}

TEST_P(BackendTest, EioAtOffsetIsIoError) {
  const uint64_t size = 1024 * 1024;
  const std::string p = dir_.File("e");
  WriteFileOrDie(p, RandomBytes(size, 41));
  FaultSpec spec;
  spec.eio_offset = 600000;
  IoOptions io;
  io.faults = std::make_shared<FaultInjector>(spec);
  OPEN_OR_SKIP(inner, p, io);
  std::unique_ptr<File> f = std::move(inner);
  if (!Syscalls()) {  // inject at the File level instead
    FileFaults ff;
    ff.eio_offset = 600000;
    f = std::make_unique<FaultInjectingFile>(std::move(f), ff);
  }
  Buffer buf(size);
  Status ok = f->ReadAt(0, {buf.data(), 4096 * 10});
  EXPECT_TRUE(ok.ok()) << ok.ToString();
  Status s = f->ReadAt(0, {buf.data(), size});
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("EIO"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(p), std::string::npos) << s.ToString();
  // Through the executor too: the error comes back, not a partial success.
  Status e = ReadViaExecutor(*f, 100, size - 200, buf.data() + 100);
  EXPECT_EQ(e.code(), StatusCode::kIoError) << e.ToString();
}

TEST_P(BackendTest, TruncatedAfterOpenIsIoErrorNotCrash) {
  const uint64_t size = 2 * 1024 * 1024 + 500;
  const auto bytes = RandomBytes(size, 51);
  const std::string p = dir_.File("t");
  WriteFileOrDie(p, bytes);
  OPEN_OR_SKIP(f, p);
  // The header was read (size known); now the file shrinks under us.
  if (auto* m = dynamic_cast<MemoryFile*>(f.get())) {
    m->Truncate(size / 2);
  } else {
    ASSERT_EQ(::truncate(p.c_str(), size / 2), 0);
  }
  Buffer buf(size + 4096);
  // Still readable before the cut.
  Status a = f->ReadAt(0, {buf.data(), 4096});
  EXPECT_TRUE(a.ok()) << a.ToString();
  // Reads reaching past the cut fail cleanly.
  Status s = f->ReadAt(0, {buf.data(), size});
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find(p), std::string::npos);
  Status t = f->ReadAt(size / 4096 * 4096, {buf.data(), size % 4096});
  EXPECT_EQ(t.code(), StatusCode::kIoError) << t.ToString();
  Status e = ReadViaExecutor(*f, 1000, size - 1000, buf.data() + 1000);
  EXPECT_EQ(e.code(), StatusCode::kIoError) << e.ToString();
}

TEST_P(BackendTest, ReadPastEndIsRejected) {
  const std::string p = dir_.File("p");
  WriteFileOrDie(p, RandomBytes(8192, 61));
  OPEN_OR_SKIP(f, p);
  Buffer buf(3 * 4096);
  Status s = f->ReadAt(4096, {buf.data(), 8192});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(f->ReadAt(8192, {buf.data(), 0}).ok());
}

TEST_P(BackendTest, EmptyFile) {
  const std::string p = dir_.File("empty");
  WriteFileOrDie(p, {});
  OPEN_OR_SKIP(f, p);
  EXPECT_EQ(f->size(), 0u);
  Buffer buf(4096);
  EXPECT_TRUE(f->ReadAt(0, {buf.data(), 0}).ok());
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendTest,
                         ::testing::Values(Kind::kPread, Kind::kDirect,
                                           Kind::kUring, Kind::kMmap,
                                           Kind::kMemory),
                         [](const auto& info) { return KindName(info.param); });
INSTANTIATE_TEST_SUITE_P(FileBackends, FileBackendTest,
                         ::testing::Values(Kind::kPread, Kind::kDirect,
                                           Kind::kUring, Kind::kMmap),
                         [](const auto& info) { return KindName(info.param); });
INSTANTIATE_TEST_SUITE_P(SyscallBackends, SyscallBackendTest,
                         ::testing::Values(Kind::kPread, Kind::kDirect,
                                           Kind::kUring),
                         [](const auto& info) { return KindName(info.param); });

// --- io_uring specifics ----------------------------------------------------

// Queue depths above the ring's 4096 entries must not ask the ring for more
// submission entries than it has.
TEST(UringTest, QueueDepthAboveRingSizeReadsEverything) {
  const uint64_t size = 4100 * 4096 + 77;
  const RandomTestFile file("deep", size, 41);
  const std::string& p = file.path;
  const auto& bytes = file.bytes;
  IoOptions io;
  io.queue_depth = 5000;
  io.uring_piece_bytes = 4096;
  auto f = OpenFile(p, Backend::kUring, io);
  if (!f.ok()) GTEST_SKIP() << f.status().ToString();
  Buffer buf(size + 4096);
  Status s = (*f)->ReadAt(0, {buf.data(), size});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(std::memcmp(buf.data(), bytes.data(), size), 0);
}

// A failing io_uring_enter must not return while reads it may have handed to
// the kernel are still landing in the caller's buffer: every submitted
// request is reaped first.
TEST(UringTest, SubmitErrorReapsEverySubmittedRead) {
  TempDir dir;
  const uint64_t size = 64 * 4096;
  const std::string p = dir.File("sub");
  WriteFileOrDie(p, RandomBytes(size, 42));
  FaultSpec spec;
  spec.submit_error_call = 1;
  spec.submit_errno = EIO;
  IoOptions io;
  io.queue_depth = 8;
  io.uring_piece_bytes = 4096;
  io.faults = std::make_shared<FaultInjector>(spec);
  auto f = OpenFile(p, Backend::kUring, io);
  if (!f.ok()) GTEST_SKIP() << f.status().ToString();
  Buffer buf(size);
  Status s = (*f)->ReadAt(0, {buf.data(), size});
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("EIO"), std::string::npos) << s.ToString();
  // The first submission queued 8 reads; each completion passes through the
  // injector once it is reaped.
  EXPECT_EQ(io.faults->calls(), 8u);
  // The file stays usable afterwards.
  auto good = std::make_unique<Buffer>(size);
  Status again = (*f)->ReadAt(0, {good->data(), size});
  EXPECT_TRUE(again.ok()) << again.ToString();
}

// When concurrent reads need more rings than the system gives (EMFILE here,
// injected for every ring after the one made at open), each read that finds
// no ring goes through pread on the same O_DIRECT fd: every read still
// lands bit-exact, and Degraded() says how many fell back and why.
TEST(UringTest, RefusedExtraRingFallsBackToDirectPread) {
  const uint64_t size = 256 * 4096;
  const RandomTestFile file("rings", size, 43);
  const std::string& p = file.path;
  const auto& bytes = file.bytes;
  FaultSpec spec;
  spec.ring_init_errno = EMFILE;
  IoOptions io;
  io.queue_depth = 4;
  io.uring_piece_bytes = 4096;
  io.faults = std::make_shared<FaultInjector>(spec);
  auto f = OpenFile(p, Backend::kUring, io);
  if (!f.ok()) GTEST_SKIP() << f.status().ToString();
  EXPECT_EQ((*f)->Degraded(), "");
  // 8 threads x 40 reads of 64 KiB from the disk (O_DIRECT, so each read
  // waits for the device while holding the one ring): some must overlap.
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Buffer buf(16 * 4096);
      for (int i = 0; i < 40; ++i) {
        const uint64_t off = ((t * 40 + i) * 7 % 240) * 4096;
        Status s = (*f)->ReadAt(off, {buf.data(), 16 * 4096});
        if (!s.ok() ||
            std::memcmp(buf.data(), bytes.data() + off, 16 * 4096) != 0) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const std::string d = (*f)->Degraded();
  EXPECT_NE(d.find("reads went through O_DIRECT pread"), std::string::npos)
      << "no read overlapped another, or the fallback did not run: '" << d
      << "'";
  EXPECT_NE(d.find(std::strerror(EMFILE)), std::string::npos) << d;
}

// Memory registered with the rings (a loader's bounce ring) is read into
// with IORING_OP_READ_FIXED; pieces outside it, or crossing its end, go the
// plain way; every read is bit-exact either way.
TEST(UringTest, ReadsIntoRegisteredBuffersUseReadFixed) {
  const uint64_t size = 256 * 4096;
  const RandomTestFile file("fixed", size, 44);
  const std::string& p = file.path;
  const auto& bytes = file.bytes;
  Buffer registered(64 * 4096);
  IoOptions io;
  io.uring_piece_bytes = 2 * 4096;
  // Only the first 32 pages of the buffer are registered.
  io.fixed_buffers.regions = {{registered.data(), 32 * 4096}};
  auto f = OpenFile(p, Backend::kUring, io);
  if (!f.ok()) GTEST_SKIP() << f.status().ToString();
  ASSERT_EQ((*f)->Degraded(), "") << "registration refused here";
  // Wholly inside: 8 pages = 4 pieces, all fixed.
  ASSERT_TRUE((*f)->ReadAt(16 * 4096, {registered.data(), 8 * 4096}).ok());
  EXPECT_EQ(std::memcmp(registered.data(), bytes.data() + 16 * 4096, 8 * 4096),
            0);
  EXPECT_EQ((*f)->registered_buffer_reads(), 4u);
  // From page 28 to 36: the two pieces before page 32 are fixed, the two
  // after it are not (they lie outside the registered region).
  ASSERT_TRUE(
      (*f)->ReadAt(40 * 4096, {registered.data() + 28 * 4096, 8 * 4096}).ok());
  EXPECT_EQ(std::memcmp(registered.data() + 28 * 4096, bytes.data() + 40 * 4096,
                        8 * 4096),
            0);
  EXPECT_EQ((*f)->registered_buffer_reads(), 6u);
  // Memory that was never registered: plain reads.
  Buffer other(8 * 4096);
  ASSERT_TRUE((*f)->ReadAt(0, {other.data(), 8 * 4096}).ok());
  EXPECT_EQ(std::memcmp(other.data(), bytes.data(), 8 * 4096), 0);
  EXPECT_EQ((*f)->registered_buffer_reads(), 6u);
}

// A kernel that refuses the registration (ENOMEM, as under a memlock limit)
// leaves the file readable the plain way, and Degraded() says so.
TEST(UringTest, RefusedBufferRegistrationFallsBackToPlainReads) {
  const uint64_t size = 64 * 4096;
  const RandomTestFile file("refused", size, 45);
  const std::string& p = file.path;
  const auto& bytes = file.bytes;
  Buffer registered(16 * 4096);
  FaultSpec spec;
  spec.register_buffers_errno = ENOMEM;
  IoOptions io;
  io.fixed_buffers.regions = {{registered.data(), 16 * 4096}};
  io.faults = std::make_shared<FaultInjector>(spec);
  auto f = OpenFile(p, Backend::kUring, io);
  if (!f.ok()) GTEST_SKIP() << f.status().ToString();
  ASSERT_TRUE((*f)->ReadAt(8 * 4096, {registered.data(), 16 * 4096}).ok());
  EXPECT_EQ(std::memcmp(registered.data(), bytes.data() + 8 * 4096, 16 * 4096),
            0);
  EXPECT_EQ((*f)->registered_buffer_reads(), 0u);
  const std::string d = (*f)->Degraded();
  EXPECT_NE(d.find("refused the registered buffers on 1 ring"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("ENOMEM"), std::string::npos) << d;
}

// A refusal costs the whole pinning before it fails, so it is not tried
// again: not by the same file's later rings, nor by a sibling file that
// shares the loader's refusal flag; both still say why they read plainly.
TEST(UringTest, RefusedRegistrationIsNotRetried) {
  const RandomTestFile file_a("a", 64 * 4096, 46), file_b("b", 64 * 4096, 46);
  const std::string &a = file_a.path, &b = file_b.path;
  const auto& bytes = file_a.bytes;  // file_b has the same (same seed)
  Buffer registered(16 * 4096);
  FaultSpec spec;
  spec.register_buffers_errno = ENOMEM;
  auto faults = std::make_shared<FaultInjector>(spec);
  IoOptions io;
  io.fixed_buffers.regions = {{registered.data(), 16 * 4096}};
  io.fixed_buffers.refused = std::make_shared<std::atomic<int>>(0);
  io.faults = faults;
  auto fa = OpenFile(a, Backend::kUring, io);
  if (!fa.ok()) GTEST_SKIP() << fa.status().ToString();
  EXPECT_EQ(faults->register_calls(), 1u);
  EXPECT_EQ(io.fixed_buffers.refused->load(), ENOMEM);
  // Concurrent reads make more rings; none of them registers again.
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Buffer buf(16 * 4096);
      for (int i = 0; i < 10; ++i) {
        const uint64_t off = ((t * 10 + i) % 48) * 4096;
        if (!(*fa)->ReadAt(off, {buf.data(), 16 * 4096}).ok() ||
            std::memcmp(buf.data(), bytes.data() + off, 16 * 4096) != 0) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  auto fb = OpenFile(b, Backend::kUring, io);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  ASSERT_TRUE((*fb)->ReadAt(0, {registered.data(), 16 * 4096}).ok());
  EXPECT_EQ(std::memcmp(registered.data(), bytes.data(), 16 * 4096), 0);
  EXPECT_EQ(faults->register_calls(), 1u);
  EXPECT_EQ((*fb)->registered_buffer_reads(), 0u);
  EXPECT_NE((*fb)->Degraded().find("ENOMEM"), std::string::npos)
      << (*fb)->Degraded();
}

// --- pieces that are not a backend ---------------------------------------

TEST(OpenFileTest, MissingFileIsNotFound) {
  for (Backend b :
       {Backend::kPread, Backend::kDirect, Backend::kUring, Backend::kMmap}) {
    auto f = OpenFile("/nonexistent/weightlift/x", b);
    ASSERT_FALSE(f.ok());
    if (b == Backend::kUring && !UringCompiledIn()) continue;
    EXPECT_EQ(f.status().code(), StatusCode::kNotFound)
        << BackendName(b) << ": " << f.status().ToString();
  }
}

TEST(OpenFileTest, UringWithoutSupportIsUnsupported) {
  TempDir dir;
  WriteFileOrDie(dir.File("x"), RandomBytes(10, 1));
  auto f = OpenFile(dir.File("x"), Backend::kUring);
  if (UringCompiledIn()) {
    // Compiled in: either it works or the kernel refused with a reason.
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
      EXPECT_NE(f.status().message().find("io_uring_queue_init"),
                std::string::npos);
    }
  } else {
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
  }
}

TEST(MemoryFileTest, EnforcesDirectContractWhenAligned) {
  MemoryFile f("m", RandomBytes(10000, 1), 4096);
  Buffer buf(16384);
  EXPECT_EQ(f.ReadAt(100, {buf.data(), 4096}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.ReadAt(0, {buf.data() + 8, 4096}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.ReadAt(0, {buf.data(), 4000}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.ReadAt(8192, {buf.data(), 10000 - 8192}).ok());  // tail
}

TEST(FaultInjectingFileTest, FailsTheNthRead) {
  FileFaults ff;
  ff.fail_read_number = 2;
  FaultInjectingFile f(std::make_unique<MemoryFile>("m", RandomBytes(100, 1)),
                       ff);
  std::byte b[10];
  EXPECT_TRUE(f.ReadAt(0, b).ok());
  EXPECT_TRUE(f.ReadAt(0, b).ok());
  EXPECT_EQ(f.ReadAt(0, b).code(), StatusCode::kIoError);
  EXPECT_TRUE(f.ReadAt(0, b).ok());
}

}  // namespace
}  // namespace weightlift::internal
