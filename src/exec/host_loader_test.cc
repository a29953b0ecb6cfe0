// Host loader on real safetensors files written by the format writer.
#include "exec/host_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "env/fault_file.h"
#include "env/page_cache.h"
#include "env/testing/temp_dir.h"
#include "exec/testing/cancel_on_first_ready.h"
#include "exec/testing/report_notes.h"
#include "format/writer.h"
#include "util/testing/reference_gather.h"
#include "util/thread_count.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::ReadFileOrDie;
using testing::TempDir;

struct Written {
  std::vector<std::vector<std::byte>> data;  // owned tensor bytes
  std::vector<TensorToWrite> tensors;
};

// Every dtype, odd sizes (so offsets land anywhere), a zero-size tensor, a
// 0-rank tensor and a few tensors large enough for direct reads.
Written MakeTensors(uint64_t seed) {
  Written w;
  std::mt19937_64 rng(seed);
  auto add = [&](std::string name, DType dt, std::vector<uint64_t> shape) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    const uint64_t bytes = n * DTypeBits(dt) / 8;
    w.data.push_back(RandomBytes(bytes, rng()));
    TensorToWrite t;
    t.name = std::move(name);
    t.dtype = dt;
    t.shape = std::move(shape);
    w.tensors.push_back(std::move(t));
  };
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    const int bits = DTypeBits(dt);
    // F4 needs an even count, F6 a multiple of 4; byte types get odd counts.
    const uint64_t n = bits == 4   ? 2 * (rng() % 500 + 1)
                       : bits == 6 ? 4 * (rng() % 300 + 1)
                                   : rng() % 3000 + 1;
    add("t." + std::string(DTypeName(dt)), dt, {n});
  }
  add("empty", DType::kF32, {0, 7});
  add("scalar", DType::kF64, {});
  add("odd.u8", DType::kU8, {3, 37});
  add("big.a", DType::kBF16, {1025, 1031});  // ~2 MiB, odd offset
  add("big.b", DType::kU8, {3 * 1024 * 1024 + 17});
  add("big.c", DType::kF32, {512, 1024});
  add("tail.u8", DType::kU8, {4099});
  for (size_t i = 0; i < w.tensors.size(); ++i) w.tensors[i].data = w.data[i];
  return w;
}

class HostLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    written_ = MakeTensors(42);
    path_ = dir_.File("model.safetensors");
    WriteOptions wo;
    wo.reference_order = false;  // keep odd-size tensors between big ones
    ASSERT_TRUE(WriteSafetensors(path_, written_.tensors, wo).ok());
    auto c = Checkpoint::Open(path_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ckpt_ = std::make_unique<Checkpoint>(std::move(*c));
    file_bytes_ = ReadFileOrDie(path_);
  }

  // The bytes of tensor NAME as they are in the file.
  std::span<const std::byte> FileBytes(const std::string& name) {
    const TensorInfo* t = ckpt_->Find(name);
    EXPECT_NE(t, nullptr);
    return {file_bytes_.data() + t->offset, t->size};
  }

  void ExpectExact(const LoadResult& r) {
    for (const LoadedTensor& t : r.tensors) {
      auto want = FileBytes(t.name);
      ASSERT_EQ(t.size, want.size()) << t.name;
      ASSERT_NE(t.data, nullptr) << t.name;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(t.data);
      if (addr % 64 != 0) {
        // Laid out as in the file for O_DIRECT reads (Loader::Load): its
        // place in the page is the file offset's, its element alignment
        // kept.
        const TensorInfo& ti = *ckpt_->Find(t.name);
        const uint64_t elem = std::max<uint64_t>(
            1, static_cast<uint64_t>(DTypeBits(ti.dtype)) / 8);
        EXPECT_EQ(addr % 4096, ti.offset % 4096) << t.name;
        EXPECT_EQ(addr % elem, 0u) << t.name;
      }
      EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
      EXPECT_TRUE(t.owner) << t.name;
      EXPECT_EQ(t.dtype, ckpt_->Find(t.name)->dtype);
      EXPECT_EQ(t.shape, ckpt_->Find(t.name)->shape);
    }
  }

  LoadOptions Options(Backend b) {
    LoadOptions o;
    o.backend = b;
    o.chunk_bytes = 256 << 10;  // many chunks even for small files
    o.staging_bytes = 1 << 20;
    o.direct_min_bytes = 64 << 10;
    o.threads = 3;
    return o;
  }

  TempDir dir_;
  Written written_;
  std::string path_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::vector<std::byte> file_bytes_;
};

class HostLoaderBackendTest : public HostLoaderTest,
                              public ::testing::WithParamInterface<Backend> {};

TEST_P(HostLoaderBackendTest, LoadAllBitExact) {
  auto loader = CreateHostLoader(Options(GetParam()));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  for (bool cold : {true, false}) {
    if (cold) {
      ASSERT_TRUE(EvictFromPageCache(path_).ok());
    } else {
      (void)ReadFileOrDie(path_);  // O_DIRECT left it cold; warm it
    }
    auto r = (*loader)->Load(*ckpt_);
    if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
      GTEST_SKIP() << r.status().ToString();
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->tensors.size(), ckpt_->tensors().size());
    for (size_t i = 0; i < r->tensors.size(); ++i) {
      EXPECT_EQ(r->tensors[i].name, ckpt_->tensors()[i].name);
    }
    ExpectExact(*r);
    const LoadReport& rep = r->report;
    EXPECT_EQ(rep.tensors, ckpt_->tensors().size());
    EXPECT_EQ(rep.bytes, ckpt_->total_bytes());
    EXPECT_GE(rep.bytes_read, rep.bytes);
    ASSERT_EQ(rep.files.size(), 1u);
    EXPECT_EQ(rep.files[0].bytes, ckpt_->total_bytes());
    EXPECT_FALSE(rep.files[0].path_taken.empty());
    EXPECT_FALSE(rep.files[0].reason.empty());
    EXPECT_EQ(rep.staging_bytes, 1u << 20);
    EXPECT_GT(rep.threads, 0);
    EXPECT_GT(rep.seconds, 0);
    EXPECT_NE(rep.ToJson().find("\"path_taken\""), std::string::npos);
    if (GetParam() == Backend::kAuto) {
      EXPECT_NE(rep.files[0].reason.find("resident"), std::string::npos)
          << rep.files[0].reason;
      if (!cold) {
        EXPECT_EQ(rep.files[0].path_taken, "pread");
      }
    }
  }
}

// threads = 0: O_DIRECT (cold) loads use more workers than buffered (warm)
// ones, and Load()'s destination populator running ahead of them leaves
// every byte exact.
TEST_F(HostLoaderTest, DefaultThreadsColdMoreThanWarmAndBitExact) {
  LoadOptions o = Options(Backend::kAuto);
  o.threads = 0;
  auto loader = CreateHostLoader(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  ASSERT_TRUE(EvictFromPageCache(path_).ok());
  auto cold = (*loader)->Load(*ckpt_);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  ExpectExact(*cold);
  (void)ReadFileOrDie(path_);
  auto warm = (*loader)->Load(*ckpt_);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  ExpectExact(*warm);
  ASSERT_EQ(warm->report.files[0].path_taken, "pread");
  EXPECT_EQ(warm->report.threads, ThreadCount(0, ThreadUse::kBufferedReads));
  // The report says where the time outside the workers went.
  const auto phases = std::find_if(
      warm->report.notes.begin(), warm->report.notes.end(),
      [](const std::string& n) { return n.starts_with("loader phases: "); });
  ASSERT_NE(phases, warm->report.notes.end());
  for (const char* phase :
       {"resolving the request", "opening the files", "allocating", "routing",
        "placing and planning", "running", "releasing the routes",
        "handing out the tensors"}) {
    EXPECT_NE(phases->find(phase), std::string::npos) << *phases;
  }
  // They add up to the load's seconds (less its setup): each is printed to
  // 0.01 ms.
  double sum_ms = 0;
  for (size_t at = phases->find(" ms"); at != std::string::npos;
       at = phases->find(" ms", at + 1)) {
    sum_ms += std::stod(phases->substr(phases->rfind(' ', at - 1) + 1));
  }
  const double load_ms =
      (warm->report.seconds - warm->report.setup_seconds) * 1e3;
  EXPECT_NEAR(sum_ms, load_ms, 0.01 + 0.01 * load_ms) << *phases;
  if (cold->report.files[0].path_taken != "pread") {
    EXPECT_GE(cold->report.threads, 4);
    EXPECT_GT(cold->report.threads, warm->report.threads);
  }
}

TEST_P(HostLoaderBackendTest, LoadIntoCallerMemoryBitExact) {
  auto loader = CreateHostLoader(Options(GetParam()));
  ASSERT_TRUE(loader.ok());
  // One buffer, destinations at deliberately odd addresses.
  uint64_t total = 0;
  for (const auto& t : ckpt_->tensors()) total += t.size + 13;
  std::vector<std::byte> arena(total + 64, std::byte{0x5A});
  std::vector<Destination> dests;
  uint64_t at = 3;
  for (const auto& t : ckpt_->tensors()) {
    dests.push_back({t.name, arena.data() + at, t.size});
    at += t.size + 13;
  }
  std::reverse(dests.begin(), dests.end());
  LoadReport rep;
  Status s = (*loader)->LoadInto(*ckpt_, dests, &rep);
  if (s.code() == StatusCode::kUnsupported) GTEST_SKIP() << s.ToString();
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Destination& d : dests) {
    auto want = FileBytes(d.name);
    EXPECT_EQ(std::memcmp(d.data, want.data(), want.size()), 0) << d.name;
    // The 13 bytes after each destination are untouched.
    for (int j = 0; j < 13; ++j) {
      ASSERT_EQ(static_cast<std::byte*>(d.data)[d.size + j], std::byte{0x5A});
    }
  }
  EXPECT_EQ(rep.bytes, ckpt_->total_bytes());
}

INSTANTIATE_TEST_SUITE_P(Backends, HostLoaderBackendTest,
                         ::testing::Values(Backend::kAuto, Backend::kPread,
                                           Backend::kDirect, Backend::kUring,
                                           Backend::kMmap),
                         [](const auto& info) {
                           return std::string(BackendName(info.param));
                         });

TEST_F(HostLoaderTest, NamesSubsetInRequestOrder) {
  auto loader = CreateHostLoader(Options(Backend::kDirect));
  ASSERT_TRUE(loader.ok());
  std::vector<std::string> names = {"big.c", "t.F16", "empty", "odd.u8"};
  auto r = (*loader)->Load(*ckpt_, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tensors.size(), 4u);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(r->tensors[i].name, names[i]);
  }
  ExpectExact(*r);
  const LoadedTensor* e = r->Find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->size, 0u);
  EXPECT_NE(e->data, nullptr);
  EXPECT_EQ(r->Find("nope"), nullptr);
  EXPECT_EQ(r->report.tensors, 4u);
}

// A loader's creation is charged to its first load, unless whoever made
// it ahead takes it (Loader::TakeSetupSeconds); the phases then still add
// up to the load's seconds.
TEST_F(HostLoaderTest, SetupIsChargedToTheFirstLoadUnlessTaken) {
  for (bool take : {false, true}) {
    SCOPED_TRACE(take ? "taken" : "not taken");
    auto loader = CreateHostLoader(Options(Backend::kPread));
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    if (take) {
      EXPECT_GT((*loader)->TakeSetupSeconds(), 0);
      EXPECT_EQ((*loader)->TakeSetupSeconds(), 0);  // once
    }
    auto first = (*loader)->Load(*ckpt_);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ExpectExact(*first);
    const LoadReport& r = first->report;
    if (take) {
      EXPECT_EQ(r.setup_seconds, 0);
    } else {
      EXPECT_GT(r.setup_seconds, 0);
    }
    EXPECT_LE(
        r.setup_seconds + r.open_seconds + r.alloc_seconds + r.transfer_seconds,
        r.seconds + 1e-9);
    auto second = (*loader)->Load(*ckpt_);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->report.setup_seconds, 0);
    EXPECT_EQ((*loader)->TakeSetupSeconds(), 0);
  }
}

TEST_F(HostLoaderTest, RequestErrors) {
  auto loader = CreateHostLoader(Options(Backend::kPread));
  ASSERT_TRUE(loader.ok());
  std::vector<std::string> missing = {"t.F16", "nope"};
  EXPECT_EQ((*loader)->Load(*ckpt_, missing).status().code(),
            StatusCode::kNotFound);
  std::vector<std::string> twice = {"t.F16", "t.F16"};
  EXPECT_EQ((*loader)->Load(*ckpt_, twice).status().code(),
            StatusCode::kInvalidArgument);

  std::vector<std::byte> buf(1 << 20);
  const TensorInfo* t = ckpt_->Find("t.F32");
  std::vector<Destination> wrong_size = {{"t.F32", buf.data(), t->size + 1}};
  Status s = (*loader)->LoadInto(*ckpt_, wrong_size);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("t.F32"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(std::to_string(t->size)), std::string::npos);
  std::vector<Destination> unknown = {{"nope", buf.data(), 4}};
  EXPECT_EQ((*loader)->LoadInto(*ckpt_, unknown).code(), StatusCode::kNotFound);
  std::vector<Destination> null_ptr = {{"t.F32", nullptr, t->size}};
  EXPECT_EQ((*loader)->LoadInto(*ckpt_, null_ptr).code(),
            StatusCode::kInvalidArgument);
}

TEST_F(HostLoaderTest, OnReadyOncePerTensorAndProgress) {
  auto loader = CreateHostLoader(Options(Backend::kDirect));
  ASSERT_TRUE(loader.ok());
  const size_t n = ckpt_->tensors().size();
  std::unique_ptr<std::atomic<int>[]> calls(new std::atomic<int>[n]);
  for (size_t i = 0; i < n; ++i) calls[i] = 0;
  std::atomic<uint64_t> last_done{0}, last_total{0};
  std::vector<std::string> names;
  for (const auto& t : ckpt_->tensors()) names.push_back(t.name);
  std::reverse(names.begin(), names.end());
  LoadCallbacks cb;
  cb.on_ready = [&](size_t index, const TensorInfo& t) {
    ASSERT_LT(index, n);
    EXPECT_EQ(t.name, names[index]);
    calls[index]++;
  };
  // Progress: never two calls at once, `done` strictly growing, the last
  // call (total, total) and made once.
  std::vector<uint64_t> progress;
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  cb.on_progress = [&](uint64_t done, uint64_t total) {
    if (inside.exchange(true)) ++overlaps;
    EXPECT_LE(done, total);
    progress.push_back(done);
    last_done = done;
    last_total = total;
    inside.store(false);
  };
  auto r = (*loader)->Load(*ckpt_, names, cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << names[i];
  EXPECT_EQ(last_done.load(), ckpt_->total_bytes());
  EXPECT_EQ(last_total.load(), ckpt_->total_bytes());
  EXPECT_EQ(overlaps.load(), 0);
  for (size_t i = 1; i < progress.size(); ++i) {
    EXPECT_LT(progress[i - 1], progress[i]) << "call " << i;
  }
  EXPECT_EQ(std::count(progress.begin(), progress.end(), ckpt_->total_bytes()),
            1);
  ExpectExact(*r);
}

// LoadCallbacks::cancel: set after the first tensor arrives, the load takes
// no more reads and fails with Cancelled; set before, it reads nothing; the
// loader then loads again as usual.
TEST_F(HostLoaderTest, CancelStopsTheLoadWithCancelled) {
  for (Backend b : {Backend::kPread, Backend::kDirect}) {
    LoadOptions o = Options(b);
    o.threads = 1;  // one worker: every chunk after the cancel is untaken
    auto loader = CreateHostLoader(o);
    ASSERT_TRUE(loader.ok());
    testing::CancelOnFirstReady cancel;
    auto r = (*loader)->Load(*ckpt_, {}, cancel.callbacks());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find("cancelled by its caller"),
              std::string::npos)
        << r.status().ToString();
    // The zero-size tensor is ready at the start; the reads stopped after
    // the chunk that completed the first tensor with bytes, far short of
    // every tensor.
    EXPECT_LT(cancel.ready(), static_cast<int>(ckpt_->tensors().size()) / 2);

    std::vector<std::byte> buf(ckpt_->Find("big.b")->size);
    std::vector<Destination> d = {{"big.b", buf.data(), buf.size()}};
    LoadCallbacks already;
    already.cancel = cancel.flag();  // still true
    EXPECT_EQ((*loader)->LoadInto(*ckpt_, d, nullptr, already).code(),
              StatusCode::kCancelled);

    auto again = (*loader)->Load(*ckpt_);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ExpectExact(*again);
  }
}

TEST_F(HostLoaderTest, InjectedErrorMidLoadReturnsErrorAndNoResult) {
  for (Backend b : {Backend::kPread, Backend::kDirect}) {
    const uint64_t bad = ckpt_->Find("big.b")->offset + 1000000;
    auto loader =
        CreateHostLoader(Options(b), [&](std::unique_ptr<File> f, uint32_t) {
          FileFaults ff;
          ff.eio_offset = bad;
          return std::make_unique<FaultInjectingFile>(std::move(f), ff);
        });
    ASSERT_TRUE(loader.ok());
    auto r = (*loader)->Load(*ckpt_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kIoError);
    EXPECT_NE(r.status().message().find("EIO"), std::string::npos)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find(path_), std::string::npos);
    EXPECT_NE(r.status().message().find("big.b"), std::string::npos)
        << r.status().ToString();
    // LoadInto reports the same failure.
    std::vector<std::byte> buf(ckpt_->Find("big.b")->size);
    std::vector<Destination> d = {{"big.b", buf.data(), buf.size()}};
    EXPECT_EQ((*loader)->LoadInto(*ckpt_, d).code(), StatusCode::kIoError);
    // The loader still works after a failed load (the failure was the
    // file's): a subset that avoids the bad byte loads fine.
    std::vector<std::string> ok_names = {"big.a", "t.F16"};
    auto r2 = (*loader)->Load(*ckpt_, ok_names);
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    ExpectExact(*r2);
  }
}

// When the io_uring backend cannot get a ring for a concurrent read (the
// system refuses more: EMFILE here, for every ring after the first), that
// read goes through pread on the same O_DIRECT fd: the load is bit-exact
// and its report says how many reads fell back and why.
TEST_F(HostLoaderTest, RefusedExtraRingsFallBackAndTheReportSaysSo) {
  LoadOptions o = Options(Backend::kUring);
  o.threads = 8;
  o.chunk_bytes = 64 << 10;  // many chunks, so reads overlap
  FaultSpec spec;
  spec.ring_init_errno = EMFILE;
  std::string reopen_error;
  auto loader = CreateHostLoader(
      o, ReopeningWithFaults(Backend::kUring, spec, &reopen_error));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ckpt_);
  if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << r.status().ToString();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(reopen_error, "");
  ExpectExact(*r);
  EXPECT_TRUE(testing::AnyNoteHas(
      r->report.notes,
      {path_, "reads went through O_DIRECT pread", std::strerror(EMFILE)}))
      << "no note about the refused rings; notes: "
      << ::testing::PrintToString(r->report.notes);
}

// io_uring reads that land in the bounce ring use it as a registered
// buffer (IORING_OP_READ_FIXED) once the load is large enough to repay the
// registration (uring_register_min_bytes; 0 here), and say so; a small load
// under the default threshold does not register. Bit-exact either way.
TEST_F(HostLoaderTest, UringBounceReadsUseRegisteredBuffers) {
  for (size_t min_bytes : {size_t{0}, LoadOptions{}.uring_register_min_bytes}) {
    LoadOptions o = Options(Backend::kUring);
    o.uring_register_min_bytes = min_bytes;
    auto loader = CreateHostLoader(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    auto r = (*loader)->Load(*ckpt_);
    if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
      GTEST_SKIP() << r.status().ToString();
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectExact(*r);
    EXPECT_EQ(testing::AnyNoteHas(r->report.notes,
                                  {"io_uring reads into registered buffers"}),
              min_bytes == 0)
        << "min_bytes " << min_bytes
        << ", notes: " << ::testing::PrintToString(r->report.notes);
  }
}

// Load() lays large tensors out as in the file and reads them in place,
// so only small tensors and block ends pass through the bounce pool; it is
// registered (faulted in and pinned whole) only when that traffic reaches
// uring_register_min_bytes, not the load's size. LoadInto's caller memory
// may send every byte through it: there the load's size decides.
TEST_F(HostLoaderTest, RegistersBounceMemoryOnlyForBounceTraffic) {
  uint64_t small = 0;
  for (const TensorInfo& t : ckpt_->tensors()) {
    if (t.size < (64u << 10)) small += t.size;
  }
  ASSERT_LT(small + 3 * 8192, 4u << 20);
  ASSERT_GT(ckpt_->total_bytes(), 4u << 20);
  LoadOptions o = Options(Backend::kUring);
  o.uring_register_min_bytes = 4 << 20;  // between the two
  auto loader = CreateHostLoader(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ckpt_);
  if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << r.status().ToString();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectExact(*r);
  EXPECT_FALSE(testing::AnyNoteHas(r->report.notes,
                                   {"io_uring reads into registered buffers"}))
      << ::testing::PrintToString(r->report.notes);
  EXPECT_TRUE(testing::AnyNoteHas(r->report.notes,
                                  {"landed straight in the destination"}))
      << ::testing::PrintToString(r->report.notes);

  std::vector<std::byte> arena(ckpt_->total_bytes() + 64);
  std::vector<Destination> dests;
  uint64_t at = 3;  // odd addresses: nothing lands in place
  for (const TensorInfo& t : ckpt_->tensors()) {
    dests.push_back({t.name, arena.data() + at, t.size});
    at += t.size;
  }
  LoadReport rep;
  Status s = (*loader)->LoadInto(*ckpt_, dests, &rep);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Destination& d : dests) {
    auto want = FileBytes(d.name);
    EXPECT_EQ(std::memcmp(d.data, want.data(), want.size()), 0) << d.name;
  }
  EXPECT_TRUE(testing::AnyNoteHas(rep.notes,
                                  {"io_uring reads into registered buffers"}))
      << ::testing::PrintToString(rep.notes);
}

TEST_F(HostLoaderTest, FileChangedSinceOpenIsIoError) {
  auto loader = CreateHostLoader(Options(Backend::kAuto));
  ASSERT_TRUE(loader.ok());
  ASSERT_EQ(::truncate(path_.c_str(), file_bytes_.size() - 100), 0);
  auto r = (*loader)->Load(*ckpt_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().ToString();
}

TEST_F(HostLoaderTest, LoaderReusedAndTensorsOutliveIt) {
  std::vector<LoadedTensor> keep;
  {
    auto loader = CreateHostLoader(Options(Backend::kDirect));
    ASSERT_TRUE(loader.ok());
    for (int round = 0; round < 4; ++round) {
      std::vector<std::string> names;
      for (size_t i = round; i < ckpt_->tensors().size(); i += 2) {
        names.push_back(ckpt_->tensors()[i].name);
      }
      auto r = (*loader)->Load(*ckpt_, names);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectExact(*r);
      keep.push_back(r->tensors.front());
    }
  }
  // The loader and the results are gone; the kept tensors are still valid.
  for (const LoadedTensor& t : keep) {
    auto want = FileBytes(t.name);
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0);
  }
}

// A freed small destination is reused by the next Load() of the same
// loader (no fresh pages to fault in), and the reused memory, which still
// holds the previous load's bytes, ends up exactly the file's bytes.
TEST_F(HostLoaderTest, FreedDestinationReusedByNextLoadBitExact) {
  for (size_t cache : {size_t{64} << 20, size_t{0}}) {
    LoadOptions o = Options(Backend::kPread);
    o.host_buffer_cache_bytes = cache;
    auto loader = CreateHostLoader(o);
    ASSERT_TRUE(loader.ok());
    const void* first = nullptr;
    {
      auto r = (*loader)->Load(*ckpt_);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      first = r->tensors.front().owner.get();
      // Scribble over the whole buffer: the next load must rewrite it all.
      for (const LoadedTensor& t : r->tensors) {
        std::memset(const_cast<void*>(t.data), 0xa5, t.size);
      }
    }
    auto r = (*loader)->Load(*ckpt_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectExact(*r);
    // With the cache off the kernel may still map the same range again,
    // so only the cached case can assert the address.
    if (cache != 0) {
      EXPECT_EQ(r->tensors.front().owner.get(), first) << "not reused";
    }
  }
}

// zero_copy: tensors are views of a private mapping of the file. They hold
// the file's bytes, point into the file's layout (not 64-byte aligned) unless
// misaligned for their dtype (then copied, and the report says how many),
// outlive the loader, and a write to one never reaches the file.
TEST_F(HostLoaderTest, ZeroCopyViewsOfAPrivateMapping) {
  LoadOptions o = Options(Backend::kAuto);
  o.zero_copy = true;
  std::vector<LoadedTensor> kept;
  LoadReport report;
  {
    auto loader = CreateHostLoader(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    auto r = (*loader)->Load(*ckpt_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    kept = r->tensors;
    report = r->report;
  }
  ASSERT_EQ(kept.size(), ckpt_->tensors().size());
  size_t want_copied = 0;
  const LoadedTensor* mapped = nullptr;  // one that is a view
  for (const LoadedTensor& t : kept) {
    const TensorInfo& ti = *ckpt_->Find(t.name);
    auto want = FileBytes(t.name);
    ASSERT_EQ(t.size, want.size()) << t.name;
    ASSERT_NE(t.data, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
    const int bits = DTypeBits(ti.dtype);
    const uint64_t elem = bits >= 8 ? bits / 8 : 1;
    if (t.size == 0) continue;
    if (ti.offset % elem != 0) {
      ++want_copied;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.name;
    } else {
      // A view: the address keeps the file offset's place in its page.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4096, ti.offset % 4096)
          << t.name;
      if (t.size >= 4096) mapped = &t;
    }
  }
  ASSERT_GT(want_copied, 0u) << "the fixture has misaligned tensors";
  ASSERT_NE(mapped, nullptr);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_EQ(report.files[0].path_taken, "mmap-view");
  EXPECT_EQ(report.bytes, ckpt_->total_bytes());
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_NE(report.notes[0].find(std::to_string(want_copied) + " tensors"),
            std::string::npos)
      << report.notes[0];
  // Copy-on-write: the tensor changes, the file does not.
  auto* bytes = static_cast<unsigned char*>(const_cast<void*>(mapped->data));
  bytes[0] ^= 0xff;
  bytes[mapped->size - 1] ^= 0xff;
  EXPECT_EQ(ReadFileOrDie(path_), file_bytes_);
  EXPECT_NE(std::memcmp(mapped->data, FileBytes(mapped->name).data(), 1), 0);
}

TEST_F(HostLoaderTest, ZeroCopyRefusesAChangedFileAndCudaDevices) {
  LoadOptions o = Options(Backend::kAuto);
  o.zero_copy = true;
  auto loader = CreateHostLoader(o);
  ASSERT_TRUE(loader.ok());
  // Grow the file after its header was read: refused, nothing loaded.
  {
    std::FILE* f = std::fopen(path_.c_str(), "ab");
    ASSERT_NE(f, nullptr);
    std::fputc(0, f);
    std::fclose(f);
  }
  auto r = (*loader)->Load(*ckpt_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("changed since"), std::string::npos)
      << r.status().ToString();
  LoadOptions cuda = o;
  cuda.device = Device::Cuda(0);
  EXPECT_EQ(cuda.Validate().code(), StatusCode::kInvalidArgument);
}

TEST_F(HostLoaderTest, ShardedCheckpoint) {
  Written a = MakeTensors(7), b = MakeTensors(8);
  for (auto& t : b.tensors) t.name = "b." + t.name;
  const std::string d = dir_.File("sharded");
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_TRUE(WriteShardedCheckpoint(d, {a.tensors, b.tensors}).ok());
  auto c = Checkpoint::Open(d);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto loader = CreateHostLoader(Options(Backend::kAuto));
  ASSERT_TRUE(loader.ok());
  auto r = (*loader)->Load(*c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->report.files.size(), 2u);
  for (const LoadedTensor& t : r->tensors) {
    const TensorInfo* info = c->Find(t.name);
    const auto bytes = ReadFileOrDie(c->files()[info->file].path);
    ASSERT_EQ(std::memcmp(t.data, bytes.data() + info->offset, t.size), 0)
        << t.name;
  }
}

TEST(HostLoaderCreateTest, RejectsBadOptionsAndCudaDevice) {
  LoadOptions o;
  o.chunk_bytes = 100;
  EXPECT_EQ(CreateHostLoader(o).status().code(), StatusCode::kInvalidArgument);
  LoadOptions c;
  c.device = Device::Cuda(0);
  EXPECT_EQ(CreateHostLoader(c).status().code(), StatusCode::kInvalidArgument);
}

// A cold load of a file in the reference layout (data at 8 mod 64) reads
// straight into the destination: only the blocks where the data starts
// and ends go through the bounce buffer.
TEST_F(HostLoaderTest, ColdLoadReadsTheFileInPlace) {
  Written w;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 6; ++i) {
    w.data.push_back(RandomBytes(300000 + 4 * (rng() % 1000), rng()));
    TensorToWrite t;
    t.name = "layer." + std::to_string(i);
    t.dtype = DType::kF32;
    t.shape = {w.data.back().size() / 4};
    w.tensors.push_back(std::move(t));
  }
  for (size_t i = 0; i < w.tensors.size(); ++i) w.tensors[i].data = w.data[i];
  const std::string path = dir_.File("reference.safetensors");
  // Metadata long enough to put the data at 8 mod 64, as most files have
  // it (8 + N, N padded to 8).
  StatusOr<Checkpoint> ckpt = Status::Internal("unset");
  WriteOptions wo;
  for (int pad = 0; pad < 64; ++pad) {
    wo.metadata["pad"] = std::string(pad, 'x');
    ASSERT_TRUE(WriteSafetensors(path, w.tensors, wo).ok());
    ckpt = Checkpoint::Open(path);
    ASSERT_TRUE(ckpt.ok());
    if (ckpt->tensors()[0].offset % 64 == 8) break;
  }
  ASSERT_EQ(ckpt->tensors()[0].offset % 64, 8u);
  LoadOptions o = Options(Backend::kDirect);
  auto loader = CreateHostLoader(o);
  ASSERT_TRUE(loader.ok());
  auto r = (*loader)->Load(*ckpt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<std::byte> bytes = ReadFileOrDie(path);
  for (const LoadedTensor& t : r->tensors) {
    const TensorInfo& ti = *ckpt->Find(t.name);
    EXPECT_EQ(std::memcmp(t.data, bytes.data() + ti.offset, ti.size), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4096, ti.offset % 4096);
  }
  // The data is one run: every chunk of it is direct except the first
  // block (header and data share it) and the partial last one.
  EXPECT_TRUE(
      testing::AnyNoteHas(r->report.notes, {" through the bounce buffer"}));
  const uint64_t data_bytes = ckpt->total_bytes();
  const uint64_t chunks = (data_bytes + o.chunk_bytes - 1) / o.chunk_bytes;
  EXPECT_TRUE(testing::AnyNoteHas(r->report.notes,
                                  {", 2 went through the bounce buffer"}))
      << r->report.ToString();
  EXPECT_GE(chunks, 2u);
  EXPECT_LE(r->report.bytes_read, data_bytes + 2 * 4096);
}

// Slices of real random tensors under every backend: row ranges, columns,
// steps, ints, whole tensors and the same tensor twice, in one load, equal
// to the reference gather of the file's bytes.
TEST_P(HostLoaderBackendTest, SlicesMatchReferenceGather) {
  auto loader = CreateHostLoader(Options(GetParam()));
  ASSERT_TRUE(loader.ok());
  std::mt19937_64 rng(11);
  std::vector<TensorRequest> req;
  for (const TensorInfo& t : ckpt_->tensors()) {
    if (DTypeBits(t.dtype) % 8 != 0) continue;
    TensorRequest r{t.name, {}};
    for (size_t i = 0; i < t.shape.size() && rng() % 4 != 0; ++i) {
      const uint64_t a = rng() % (t.shape[i] + 1);
      const uint64_t b = a + rng() % (t.shape[i] - a + 1);
      r.slices.push_back({a, b, rng() % 3 == 0 ? 1 + rng() % 5 : 1});
    }
    req.push_back(r);
  }
  // Columns of the 2-D tensor, and its rows, and the same tensor again.
  req.push_back({"big.a", {{0, 1025, 1}, {100, 612, 1}}});
  req.push_back({"big.a", {{3, 900, 1}}});
  req.push_back({"big.c", {{0, 512, 3}, {7, 1000, 2}}});
  req.push_back({"odd.u8", {{1, 2, 1}}});
  auto r = (*loader)->LoadSlices(*ckpt_, req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tensors.size(), req.size());
  for (size_t k = 0; k < req.size(); ++k) {
    const LoadedTensor& t = r->tensors[k];
    const TensorInfo& ti = *ckpt_->Find(req[k].name);
    const int eb = DTypeBits(ti.dtype) / 8;
    const auto want = testing::ReferenceGather(FileBytes(ti.name), ti.shape, eb,
                                               req[k].slices);
    ASSERT_EQ(t.size, want.size()) << k << " " << ti.name;
    uint64_t n = static_cast<uint64_t>(eb);
    for (uint64_t d : t.shape) n *= d;
    EXPECT_EQ(n, t.size);
    if (!want.empty()) {
      const auto* got = static_cast<const std::byte*>(t.data);
      const size_t bad = static_cast<size_t>(
          std::mismatch(want.begin(), want.end(), got).first - want.begin());
      EXPECT_EQ(bad, want.size())
          << "request " << k << " (" << ti.name << ", " << req[k].slices.size()
          << " slices, " << want.size() << " bytes) differs from byte " << bad;
    }
  }
  EXPECT_TRUE(testing::AnyNoteHas(r->report.notes, {"slices: "}))
      << r->report.ToString();
}

// A slice of a few rows reads a small part of its file: in auto mode it is
// read buffered without sampling the file's residency (that costs a
// mapping per call); a load of the whole file still samples.
TEST_F(HostLoaderTest, SmallPartOfAFileIsReadBufferedWithoutSampling) {
  auto loader = CreateHostLoader(Options(Backend::kAuto));
  ASSERT_TRUE(loader.ok());
  const TensorInfo& a = *ckpt_->Find("big.a");
  std::vector<TensorRequest> rows = {{"big.a", {{3, 5, 1}}}};
  auto r = (*loader)->LoadSlices(*ckpt_, rows);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->report.files.size(), 1u);
  EXPECT_EQ(r->report.files[0].path_taken, "pread");
  EXPECT_NE(r->report.files[0].reason.find("small read"), std::string::npos)
      << r->report.files[0].reason;
  const auto want = testing::ReferenceGather(
      FileBytes("big.a"), a.shape, DTypeBits(a.dtype) / 8, rows[0].slices);
  ASSERT_EQ(r->tensors[0].size, want.size());
  EXPECT_EQ(std::memcmp(r->tensors[0].data, want.data(), want.size()), 0);
  auto whole = (*loader)->Load(*ckpt_);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_NE(whole->report.files[0].reason.find("resident"), std::string::npos)
      << whole->report.files[0].reason;
}

TEST_F(HostLoaderTest, SliceErrorsNameTheTensor) {
  auto loader = CreateHostLoader(Options(Backend::kPread));
  ASSERT_TRUE(loader.ok());
  std::vector<TensorRequest> missing = {{"nope", {}}};
  EXPECT_EQ((*loader)->LoadSlices(*ckpt_, missing).status().code(),
            StatusCode::kNotFound);
  std::vector<TensorRequest> past = {{"big.a", {{0, 1026, 1}}}};
  auto s = (*loader)->LoadSlices(*ckpt_, past).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'big.a' dimension 0 (size 1025)"),
            std::string::npos)
      << s.message();
  std::vector<TensorRequest> f4 = {{"t.F4", {{0, 2, 1}}}};
  EXPECT_EQ((*loader)->LoadSlices(*ckpt_, f4).status().code(),
            StatusCode::kUnsupported);
}

}  // namespace
}  // namespace weightlift::internal
