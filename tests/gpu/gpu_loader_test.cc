// GPU tests of the CUDA loader (label `gpu`). Each test skips with the reason
// when cuda:0 cannot be used. On a GPU they check, against bytes written by
// st_builder.h and against a host load: every dtype bit-exact, odd offsets
// and sizes, chunk boundaries, all three host_register modes, cold files
// (O_DIRECT), caller destinations, on_ready timing, GDS auto/on behaviour,
// device out-of-memory, truncated files and loader reuse.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_loader.h"
#include "cuda/cufile_lib.h"
#include "cuda/device_available.h"
#include "device_baselines.h"
#include "env/fault_file.h"
#include "env/page_cache.h"
#include "exec/testing/cancel_on_first_ready.h"
#include "exec/testing/report_notes.h"
#include "gpu_test_fixture.h"
#include "st_builder.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

namespace weightlift {
namespace {

namespace fs = std::filesystem;
using testing::Spec;
using testing::TensorSpec;

// Every dtype of the spec, with element counts that make odd byte sizes
// where the dtype allows it.
std::vector<TensorSpec> AllDTypeSpecs() {
  return {
      Spec("bool_odd", "BOOL", {3, 5}),
      Spec("f4_pairs", "F4", {7, 2}),
      Spec("f6_e2m3", "F6_E2M3", {4, 3}),
      Spec("f6_e3m2", "F6_E3M2", {12}),
      Spec("u8_prime", "U8", {1009}),
      Spec("i8", "I8", {33, 3}),
      Spec("f8_e5m2", "F8_E5M2", {17}),
      Spec("f8_e4m3", "F8_E4M3", {65537}),
      Spec("f8_e8m0", "F8_E8M0", {5}),
      Spec("f8_e4m3fnuz", "F8_E4M3FNUZ", {9}),
      Spec("f8_e5m2fnuz", "F8_E5M2FNUZ", {11}),
      Spec("i16", "I16", {13}),
      Spec("u16", "U16", {7, 7}),
      Spec("f16", "F16", {301}),
      Spec("bf16_big", "BF16", {1537, 1031}),  // ~3 MiB, spans chunks
      Spec("i32", "I32", {19}),
      Spec("u32", "U32", {23}),
      Spec("f32", "F32", {129, 257}),
      Spec("c64", "C64", {3}),
      Spec("f64", "F64", {31}),
      Spec("i64", "I64", {2}),
      Spec("u64", "U64", {1}),
      Spec("empty", "F32", {0, 4}),
      Spec("scalar", "F32", {}),
  };
}

class CudaLoaderTest : public testing::GpuFileTest {
 protected:
  // Checks every tensor of R against the file and, when HOST is given,
  // against the host loader's bytes. Returns the number of mismatches.
  static int CheckExact(const Checkpoint& ck, const LoadResult& r,
                        const LoadResult* host = nullptr) {
    int bad = 0;
    for (const LoadedTensor& t : r.tensors) {
      const TensorInfo* info = ck.Find(t.name);
      EXPECT_NE(info, nullptr);
      if (!info) return ++bad;
      EXPECT_EQ(t.size, info->size) << t.name;
      EXPECT_TRUE(t.device.is_cuda()) << t.name;
      if (t.size) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 256, 0u) << t.name;
      }
      auto want = FileBytes(ck, *info);
      auto got = DeviceBytes(t.data, t.size);
      if (want != got) {
        ++bad;
        ADD_FAILURE() << "tensor '" << t.name << "' (" << t.size
                      << " bytes at file offset " << info->offset
                      << ") differs on the device from the file";
      }
      if (host) {
        const LoadedTensor* h = host->Find(t.name);
        EXPECT_NE(h, nullptr) << t.name;
        if (h && (h->size != t.size ||
                  (t.size && std::memcmp(h->data, got.data(), t.size) != 0))) {
          ++bad;
          ADD_FAILURE() << "tensor '" << t.name
                        << "' differs between host and device loads";
        }
      }
    }
    return bad;
  }

  static size_t FreeDeviceBytes() {
    size_t f = 0, t = 0;
    cudaDeviceSynchronize();
    EXPECT_EQ(cudaMemGetInfo(&f, &t), cudaSuccess);
    return f;
  }

  static LoadOptions Cuda() {
    LoadOptions o;
    o.device = Device::Cuda(0);
    return o;
  }
  // No host-register, THREADS workers with two 64 KiB staging slots each:
  // many chunks, many slot reuses. GDS stays auto (callers that must test
  // the staging ring turn it off).
  static LoadOptions SmallStaging(int threads) {
    LoadOptions o = Cuda();
    o.threads = threads;
    o.cuda_chunk_bytes = 64u << 10;
    o.chunk_bytes = o.cuda_chunk_bytes;  // Validate: staging >= chunk_bytes
    o.staging_bytes = (64u << 10) * 2 * threads;
    o.host_register = HostRegisterMode::kOff;
    return o;
  }
};

TEST_F(CudaLoaderTest, EveryDTypeBitExactAgainstFileAndHostLoad) {
  std::string path = Write("all.safetensors", AllDTypeSpecs(), 1);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files()[0].data_offset % 2, 1u) << "want odd offsets";

  auto host_loader = Loader::Create(LoadOptions{});
  ASSERT_TRUE(host_loader.ok()) << host_loader.status().ToString();
  auto host = (*host_loader)->Load(*ck);
  ASSERT_TRUE(host.ok()) << host.status().ToString();

  auto loader = Loader::Create(Cuda());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tensors.size(), ck->tensors().size());
  EXPECT_EQ(CheckExact(*ck, *r, &*host), 0);
  EXPECT_EQ(r->report.bytes, ck->total_bytes());
  EXPECT_GE(r->report.device_bytes, ck->total_bytes());
  ASSERT_EQ(r->report.files.size(), 1u);
  std::cout << r->report.ToString() << "\n";
}

// Only zero-byte tensors requested: no file is touched, yet every tensor
// gets a valid non-null device pointer (a crash once: the report entry of an
// untouched file was indexed with -1).
TEST_F(CudaLoaderTest, OnlyEmptyTensorsGetValidPointers) {
  std::string path = Write("empty.safetensors", AllDTypeSpecs(), 3);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<std::string> names = {"empty"};
  auto loader = Loader::Create(Cuda());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  int ready = 0;
  LoadCallbacks cb;
  cb.on_ready = [&](size_t, const TensorInfo&) { ++ready; };
  auto r = (*loader)->Load(*ck, names, cb);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].size, 0u);
  EXPECT_NE(r->tensors[0].data, nullptr);
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(r->report.bytes, 0u);
}

TEST_F(CudaLoaderTest, SmallChunksManyBoundariesAndSubsetInRequestOrder) {
  std::vector<TensorSpec> s = AllDTypeSpecs();
  std::string p1 = Write("a.safetensors", s, 2);
  auto ck = Checkpoint::Open(p1);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (int threads : {1, 3}) {
    LoadOptions o = SmallStaging(threads);
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    std::vector<std::string> names = {"u64", "bf16_big", "bool_odd", "empty",
                                      "f8_e4m3"};
    auto r = (*loader)->Load(*ck, names);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->tensors.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(r->tensors[i].name, names[i]);
    }
    EXPECT_EQ(CheckExact(*ck, *r), 0) << "threads " << threads;
    EXPECT_EQ(r->report.threads, threads);
  }
}

TEST_F(CudaLoaderTest, HostRegisterOnOffAutoAllBitExact) {
  std::string path = Write("hr.safetensors", AllDTypeSpecs(), 3);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (auto mode : {HostRegisterMode::kOn, HostRegisterMode::kOff,
                    HostRegisterMode::kAuto}) {
    LoadOptions o = Cuda();
    o.host_register = mode;
    o.host_register_piece_bytes = 1u << 20;  // several pieces per file
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    auto r = (*loader)->Load(*ck);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(CheckExact(*ck, *r), 0) << "mode " << static_cast<int>(mode);
    ASSERT_EQ(r->report.files.size(), 1u);
    const FileReport& f = r->report.files[0];
    std::cout << "host_register mode " << static_cast<int>(mode) << ": "
              << f.path_taken << " -- " << f.reason << "\n";
    if (mode == HostRegisterMode::kOn) {
      EXPECT_EQ(f.path_taken, "host-register");
    }
    if (mode == HostRegisterMode::kOff) {
      EXPECT_EQ(f.path_taken.rfind("pinned-staging+", 0), 0u) << f.path_taken;
    }
    EXPECT_FALSE(f.reason.empty());
  }
}

// A rank told that 8 processes load on this host at once (torchrun's
// LOCAL_WORLD_SIZE) copies on one stream, from registered pages and from
// the staging ring alike, bit-exact, and its first report says so.
TEST_F(CudaLoaderTest, CoLocatedRankCopiesOnOneStreamBitExact) {
  std::string path = Write("colocated.safetensors", AllDTypeSpecs(), 5);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (auto mode : {HostRegisterMode::kOn, HostRegisterMode::kOff}) {
    LoadOptions o = Cuda();
    o.local_world_size = 8;
    o.host_register = mode;
    o.host_register_piece_bytes = 1u << 20;
    o.cuda_chunk_bytes = 64u << 10;  // many chunks through the one stream
    o.chunk_bytes = o.cuda_chunk_bytes;
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    auto r = (*loader)->Load(*ck);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(CheckExact(*ck, *r), 0) << "mode " << static_cast<int>(mode);
    bool said_one_stream = false, set_up_one_stream = false;
    for (const std::string& n : r->report.notes) {
      said_one_stream |= n.find("copy streams: 1, as 8 processes") == 0;
      set_up_one_stream |= n.find(" 1 streams + ") != std::string::npos;
    }
    EXPECT_TRUE(said_one_stream) << r->report.ToString();
    EXPECT_TRUE(set_up_one_stream) << r->report.ToString();
  }
}

TEST_F(CudaLoaderTest, ColdFileThroughDirectIoBitExact) {
  std::string path = Write("cold.safetensors", AllDTypeSpecs(), 4);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  Status ev = internal::EvictFromPageCache(path);
  ASSERT_TRUE(ev.ok()) << ev.ToString();
  auto loader = Loader::Create(Cuda());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CheckExact(*ck, *r), 0);
  std::cout << "cold: " << r->report.files[0].path_taken << " -- "
            << r->report.files[0].reason << "\n";
}

// The staging path reads through the same io_uring backend as the host
// loader: when further rings are refused (EMFILE, injected), concurrent
// reads go through pread on the O_DIRECT fd, the load stays bit-exact and
// the CUDA report carries the fallback note.
TEST_F(CudaLoaderTest, RefusedExtraRingsFallBackAndTheReportSaysSo) {
  std::vector<TensorSpec> specs = AllDTypeSpecs();
  specs.push_back(Spec("big", "U8", {24u << 20}));  // 384 reads of 64 KiB
  std::string path = Write("rings.safetensors", specs, 6);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  LoadOptions o = Cuda();
  o.backend = Backend::kUring;
  o.gds = GdsMode::kOff;
  o.host_register = HostRegisterMode::kOff;  // staging: reads via the File
  o.threads = 8;
  o.cuda_chunk_bytes = 64 << 10;  // many slots, so reads overlap
  internal::FaultSpec spec;
  spec.ring_init_errno = EMFILE;
  std::string reopen_error;
  internal::CudaLoaderHooks hooks;
  hooks.wrap_file =
      internal::ReopeningWithFaults(Backend::kUring, spec, &reopen_error);
  auto loader = internal::CreateCudaLoader(o, std::move(hooks));
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << r.status().ToString();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(reopen_error, "");
  EXPECT_EQ(CheckExact(*ck, *r), 0);
  EXPECT_TRUE(internal::testing::AnyNoteHas(
      r->report.notes,
      {"reads went through O_DIRECT pread", std::strerror(EMFILE)}))
      << "no note about the refused rings; notes: "
      << ::testing::PrintToString(r->report.notes);
}

// The staging ring is pinned in waves (slot k of every worker), each
// registered once all its slots were first written (staging_sink.h). A
// wave whose registration is refused stays unpinned and its copies go from
// pageable memory: every load still succeeds bit-exact, and every report
// says so, naming the reason. Checked with wave 1 refused, then every wave.
TEST_F(CudaLoaderTest, RefusedPinningCopiesFromPageableMemoryAndSaysSo) {
  std::vector<TensorSpec> specs = AllDTypeSpecs();
  specs.push_back(Spec("big", "U8", {6u << 20}));  // 96 chunks of 64 KiB
  std::string path = Write("unpinned.safetensors", specs, 8);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (int refused_from : {1, 0}) {
    SCOPED_TRACE("waves refused from " + std::to_string(refused_from));
    LoadOptions o = SmallStaging(4);
    o.gds = GdsMode::kOff;
    std::atomic<int> asked{0};
    internal::CudaLoaderHooks hooks;
    hooks.before_pin = [&](int wave) {
      ++asked;
      return wave >= refused_from
                 ? Status::ResourceExhausted("test refuses wave " +
                                             std::to_string(wave))
                 : Status::OK();
    };
    auto loader = internal::CreateCudaLoader(o, std::move(hooks));
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int load = 0; load < 2; ++load) {
      auto r = (*loader)->Load(*ck);
      ASSERT_TRUE(r.ok()) << "load " << load << ": " << r.status().ToString();
      EXPECT_EQ(CheckExact(*ck, *r), 0) << "load " << load;
      EXPECT_TRUE(internal::testing::AnyNoteHas(
          r->report.notes, {"staging ring not pinned", "pageable",
                            "test refuses wave " + std::to_string(1)}))
          << "load " << load
          << "; notes: " << ::testing::PrintToString(r->report.notes);
    }
    EXPECT_EQ(asked.load(), 2) << "each wave is registered (or refused) once";
  }
}

// A wave is pinned once all its slots were written, and a worker with no
// chunk never writes its slots: the worker that needs the wave writes them
// itself. Here 8 workers load a checkpoint of 12 chunks, so some take two
// and others one at most; without that help the loads would never end.
TEST_F(CudaLoaderTest, WavesArePinnedWhenMostWorkersHaveNothingToDo) {
  std::string path = Write("few_chunks.safetensors",
                           {Spec("t", "U8", {12u * (64u << 10)})}, 9);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  LoadOptions o = SmallStaging(8);
  o.gds = GdsMode::kOff;
  auto loader = internal::CreateCudaLoader(o, internal::CudaLoaderHooks{});
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  std::vector<std::string> notes;
  for (int load = 0; load < 4; ++load) {
    auto r = (*loader)->Load(*ck);
    ASSERT_TRUE(r.ok()) << "load " << load << ": " << r.status().ToString();
    EXPECT_EQ(CheckExact(*ck, *r), 0) << "load " << load;
    notes.insert(notes.end(), r->report.notes.begin(), r->report.notes.end());
  }
  EXPECT_FALSE(internal::testing::AnyNoteHas(notes, {"not pinned"}))
      << ::testing::PrintToString(notes);
  EXPECT_TRUE(internal::testing::AnyNoteHas(notes, {"staging ring pinned"}))
      << ::testing::PrintToString(notes);
}

// Cold reads through io_uring land in the pinned staging ring, which is
// registered with the rings (IORING_OP_READ_FIXED) when the load is large
// enough (0 here): bit-exact, and the report says how many reads did. Some
// kernels cannot pin cudaHostAlloc memory for io_uring (EOPNOTSUPP): then
// the report must say the registration was refused, and the load is still
// bit-exact.
TEST_F(CudaLoaderTest, UringReadsIntoTheRegisteredStagingRing) {
  std::string path = Write("fixed.safetensors", AllDTypeSpecs(), 7);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  LoadOptions o = Cuda();
  o.backend = Backend::kUring;
  o.gds = GdsMode::kOff;
  o.host_register = HostRegisterMode::kOff;
  o.uring_register_min_bytes = 0;
  auto loader = Loader::Create(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
    GTEST_SKIP() << r.status().ToString();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CheckExact(*ck, *r), 0);
  const bool registered = internal::testing::AnyNoteHas(
      r->report.notes, {"io_uring reads into registered buffers"});
  const bool refused = internal::testing::AnyNoteHas(
      r->report.notes, {"refused the registered buffers"});
  EXPECT_TRUE(registered != refused)
      << ::testing::PrintToString(r->report.notes);
  std::cout << "staging ring registration: "
            << (registered ? "used" : "refused") << "\n";
}

TEST_F(CudaLoaderTest, CallerDestinationsFilledInPlaceAndChecked) {
  std::string path = Write("dst.safetensors", AllDTypeSpecs(), 5);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<Destination> dests;
  std::vector<void*> mem;
  for (const TensorInfo& t : ck->tensors()) {
    void* p = nullptr;
    if (t.size) {
      ASSERT_EQ(cudaMalloc(&p, t.size), cudaSuccess);
    }
    mem.push_back(p);
    dests.push_back({t.name, p, t.size});
  }
  auto loader = Loader::Create(Cuda());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  LoadReport report;
  Status s = (*loader)->LoadInto(*ck, dests, &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(report.device_bytes, 0u) << "LoadInto allocates no device memory";
  for (const Destination& d : dests) {
    auto want = FileBytes(*ck, *ck->Find(d.name));
    EXPECT_EQ(DeviceBytes(d.data, d.size), want) << d.name;
  }
  // Wrong size: InvalidArgument naming the tensor.
  std::vector<Destination> bad = {dests[4]};
  bad[0].size += 1;
  s = (*loader)->LoadInto(*ck, bad, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(bad[0].name), std::string::npos) << s.ToString();
  // Host memory is not a device destination.
  std::vector<uint8_t> host(dests[4].size);
  std::vector<Destination> on_host = {
      {dests[4].name, host.data(), host.size()}};
  s = (*loader)->LoadInto(*ck, on_host, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  // Right size, but the pointer sits so near the end of its allocation that
  // the copy would run past it: refused before anything is read.
  const TensorInfo& big = *ck->Find("u8_prime");
  ASSERT_EQ(big.size, 1009u);
  void* small = nullptr;
  ASSERT_EQ(cudaMalloc(&small, 1 << 20), cudaSuccess);
  std::vector<Destination> overrun = {
      {big.name, static_cast<uint8_t*>(small) + (1 << 20) - big.size / 2 - 1,
       big.size}};
  s = (*loader)->LoadInto(*ck, overrun, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("past the allocation"), std::string::npos)
      << s.ToString();
  // The same allocation, pointer at its start: fits, and loads.
  overrun[0].data = small;
  s = (*loader)->LoadInto(*ck, overrun, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(DeviceBytes(small, big.size), FileBytes(*ck, big));
  cudaFree(small);
  for (void* p : mem) cudaFree(p);
}

TEST_F(CudaLoaderTest, OnReadyOncePerTensorOnlyAfterBytesArrived) {
  std::string path = Write("ready.safetensors", AllDTypeSpecs(), 6);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  for (auto mode : {HostRegisterMode::kOff, HostRegisterMode::kOn}) {
    LoadOptions o = Cuda();
    o.host_register = mode;
    o.cuda_chunk_bytes = 256u << 10;
    o.chunk_bytes = o.cuda_chunk_bytes;
    o.staging_bytes = 4u << 20;
    o.threads = 4;
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    // Destinations are ours, so the callback knows where to look.
    std::vector<Destination> dests;
    std::vector<void*> mem;
    for (const TensorInfo& t : ck->tensors()) {
      void* p = nullptr;
      if (t.size) {
        ASSERT_EQ(cudaMalloc(&p, t.size), cudaSuccess);
      }
      if (t.size) {
        ASSERT_EQ(cudaMemset(p, 0, t.size), cudaSuccess);
      }
      mem.push_back(p);
      dests.push_back({t.name, p, t.size});
    }
    cudaDeviceSynchronize();
    std::mutex mu;
    std::map<size_t, int> calls;
    int early = 0;
    LoadCallbacks cb;
    cb.on_ready = [&](size_t i, const TensorInfo& t) {
      // The bytes must already be on the device when we are told.
      std::vector<uint8_t> got(t.size);
      if (t.size) {
        cudaSetDevice(0);
        cudaMemcpy(got.data(), dests[i].data, t.size, cudaMemcpyDeviceToHost);
      }
      bool ok = got == FileBytes(*ck, t);
      std::lock_guard<std::mutex> l(mu);
      calls[i]++;
      if (!ok) early++;
      EXPECT_EQ(t.name, dests[i].name);
    };
    Status s = (*loader)->LoadInto(*ck, dests, nullptr, cb);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(calls.size(), dests.size());
    for (auto& [i, n] : calls) EXPECT_EQ(n, 1) << dests[i].name;
    EXPECT_EQ(early, 0) << "on_ready fired before the bytes were on the device";
    for (void* p : mem) cudaFree(p);
  }
}

TEST_F(CudaLoaderTest, GdsAutoFallsBackAndSaysWhy) {
  std::string path = Write("gds.safetensors", AllDTypeSpecs(), 7);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  // Cold, so auto would consider GDS at all.
  ASSERT_TRUE(internal::EvictFromPageCache(path).ok());
  LoadOptions o = Cuda();
  o.gds = GdsMode::kAuto;
  auto loader = Loader::Create(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CheckExact(*ck, *r), 0);
  const FileReport& f = r->report.files[0];
  std::cout << "gds auto: " << f.path_taken << " -- " << f.reason << "\n";
  for (auto& n : r->report.notes) std::cout << "note: " << n << "\n";
  if (!internal::NvidiaFsLoaded()) {
    EXPECT_NE(f.path_taken, "gds");
    EXPECT_NE(f.reason.find("nvidia-fs"), std::string::npos) << f.reason;
  } else if (f.path_taken != "gds") {
    // nvidia-fs present but cuFile refused: the report must say so.
    bool noted = false;
    for (auto& n : r->report.notes) noted |= n.find("GDS") != std::string::npos;
    EXPECT_TRUE(noted);
  }
}

TEST_F(CudaLoaderTest, GdsOnIsUnsupportedWithoutNvidiaFs) {
  if (internal::NvidiaFsLoaded()) {
    GTEST_SKIP() << "nvidia-fs is loaded here; gds=on may legitimately work";
  }
  std::string path = Write("gdson.safetensors", AllDTypeSpecs(), 8);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  LoadOptions o = Cuda();
  o.gds = GdsMode::kOn;
  auto loader = Loader::Create(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  size_t before = FreeDeviceBytes();
  auto r = (*loader)->Load(*ck);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("nvidia-fs"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(FreeDeviceBytes(), before);
}

TEST_F(CudaLoaderTest, DeviceOutOfMemoryIsCleanAndFreesEverything) {
  size_t free0 = FreeDeviceBytes();
  // A sparse file declaring more tensor bytes than the device has free.
  uint64_t per = free0 / 2 + (1ull << 30);
  std::vector<TensorSpec> s = {Spec("huge_a", "U8", {per}),
                               Spec("huge_b", "U8", {per})};
  std::string err;
  auto f = testing::WriteSafetensors(dir_ + "/huge.safetensors", s, 9, true,
                                     &err, /*sparse=*/true);
  ASSERT_FALSE(f.path.empty()) << err;
  auto ck = Checkpoint::Open(f.path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  auto loader = Loader::Create(Cuda());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  size_t before = FreeDeviceBytes();
  auto r = (*loader)->Load(*ck);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find(std::to_string(2 * per)),
            std::string::npos)
      << "names the bytes requested: " << r.status().ToString();
  EXPECT_NE(r.status().message().find("free"), std::string::npos);
  std::cout << "OOM: " << r.status().ToString() << "\n";
  EXPECT_EQ(FreeDeviceBytes(), before) << "device memory not back";
  // The loader is still usable afterwards.
  std::string ok_path = Write("after_oom.safetensors", AllDTypeSpecs(), 10);
  auto ck2 = Checkpoint::Open(ok_path);
  ASSERT_TRUE(ck2.ok());
  auto r2 = (*loader)->Load(*ck2);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(CheckExact(*ck2, *r2), 0);
}

TEST_F(CudaLoaderTest, TruncatedFileFailsWithNothingLoaded) {
  std::vector<TensorSpec> s = AllDTypeSpecs();
  std::string p1 = Write("good.safetensors", s, 11);
  std::string p2 = Write(
      "bad.safetensors",
      {Spec("x_big", "F32", {3u << 20}), Spec("y_tail", "F32", {1000})}, 12);
  auto ck = Checkpoint::Open(dir_);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  // The file shrinks after its header was validated.
  ASSERT_EQ(truncate(p2.c_str(), 4096), 0);
  for (auto mode : {HostRegisterMode::kOff, HostRegisterMode::kOn}) {
    LoadOptions o = Cuda();
    o.host_register = mode;
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    size_t before = FreeDeviceBytes();
    std::atomic<int> ready{0};
    LoadCallbacks cb;
    cb.on_ready = [&](size_t, const TensorInfo&) { ready++; };
    auto r = (*loader)->Load(*ck, {}, cb);
    ASSERT_FALSE(r.ok()) << "a truncated file must fail the load";
    EXPECT_TRUE(r.status().code() == StatusCode::kIoError ||
                r.status().code() == StatusCode::kCorruption)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find("bad.safetensors"), std::string::npos)
        << r.status().ToString();
    std::cout << "truncated: " << r.status().ToString() << " (on_ready fired "
              << ready.load() << " times)\n";
    EXPECT_EQ(FreeDeviceBytes(), before) << "device memory not back";
  }
}

// LoadCallbacks::cancel through pinned staging: set once the first tensor
// is on the device, the load takes no more chunks, waits for the copies in
// flight, fails with Cancelled and frees its device memory; the loader then
// loads everything bit-exact.
TEST_F(CudaLoaderTest, CancelledLoadDrainsItsCopiesAndFreesEverything) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 32; ++i) {
    specs.push_back(Spec("t" + std::to_string(i), "F32", {256u << 10}));
  }
  std::string p = Write("cancel.safetensors", specs, 21);
  auto ck = Checkpoint::Open(p);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  LoadOptions o = SmallStaging(1);  // one worker, 64 KiB slots: 512 chunks
  o.gds = GdsMode::kOff;
  auto loader = Loader::Create(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  const size_t before = FreeDeviceBytes();
  internal::testing::CancelOnFirstReady cancel;
  auto r = (*loader)->Load(*ck, {}, cancel.callbacks());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_LT(cancel.ready(), 8) << "the reads went on after the cancel";
  EXPECT_EQ(FreeDeviceBytes(), before) << "device memory not back";
  auto again = (*loader)->Load(*ck);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const LoadedTensor& t : again->tensors) {
    const TensorInfo* ti = ck->Find(t.name);
    ASSERT_NE(ti, nullptr);
    EXPECT_EQ(DeviceBytes(t.data, t.size), FileBytes(*ck, *ti)) << t.name;
  }
}

TEST_F(CudaLoaderTest, LoaderReusedForSeveralLoadsAndOwnersOutliveIt) {
  std::string p = Write("reuse.safetensors", AllDTypeSpecs(), 13, true);
  auto ck = Checkpoint::Open(p);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<LoadResult> kept;
  {
    // Warm-up: the driver sets up lazily on first use (streams, copy
    // engines) and keeps a little device memory for itself afterwards.
    auto warm = Loader::Create(Cuda());
    ASSERT_TRUE(warm.ok()) << warm.status().ToString();
    ASSERT_TRUE((*warm)->Load(*ck).ok());
  }
  size_t free_before = FreeDeviceBytes();
  {
    auto loader = Loader::Create(Cuda());
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    uint64_t staging = 0;
    for (int i = 0; i < 4; ++i) {
      auto r = (*loader)->Load(*ck);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(CheckExact(*ck, *r), 0) << "load " << i;
      if (i == 0) staging = r->report.staging_bytes;
      EXPECT_EQ(r->report.staging_bytes, staging) << "staging allocated once";
      kept.push_back(std::move(r).value());
    }
  }
  // The loader is gone; the tensors stay valid through their owners.
  for (auto& r : kept) EXPECT_EQ(CheckExact(*ck, r), 0);
  kept.clear();
  size_t free_after = FreeDeviceBytes();
  std::cout << "free device memory before " << free_before << ", after "
            << free_after << "\n";
  EXPECT_EQ(free_after, free_before) << "device memory leaked";
}

TEST_F(CudaLoaderTest, ShardedCheckpointWithIndexBitExact) {
  std::vector<std::vector<TensorSpec>> shards(2);
  auto all = AllDTypeSpecs();
  for (size_t i = 0; i < all.size(); ++i) shards[i % 2].push_back(all[i]);
  std::string err;
  ASSERT_TRUE(testing::WriteShardedCheckpoint(dir_, shards, 14, &err)) << err;
  auto ck = Checkpoint::Open(dir_ + "/model.safetensors.index.json");
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files().size(), 2u);
  for (auto mode : {HostRegisterMode::kOff, HostRegisterMode::kOn}) {
    LoadOptions o = Cuda();
    o.host_register = mode;
    auto loader = Loader::Create(o);
    ASSERT_TRUE(loader.ok());
    auto r = (*loader)->Load(*ck);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(CheckExact(*ck, *r), 0);
    EXPECT_EQ(r->report.files.size(), 2u);
  }
}

TEST(CudaBaselinesGpu, PinnedCeilingAndNaivePathRun) {
  std::string why;
  if (!internal::CudaDeviceAvailable(0, &why)) GTEST_SKIP() << why;
  auto g = bench::MeasurePinnedCopyGBps(0, 256ull << 20);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::cout << "pinned host->device ceiling (256 MiB): " << *g << " GB/s\n";
  EXPECT_GT(*g, 1.0);
}

// A file renamed over the checkpoint's path mid-load (before the 3rd read,
// through the fault-injecting File's hook): the loader keeps reading the
// file it opened and then refuses to report success, naming the file, what
// changed, a tensor and its offset; device memory is back; the same loader
// loads the checkpoint again (reopened) bit-exact. Both transfer paths.
TEST_F(CudaLoaderTest, FileReplacedDuringTheLoadIsAnErrorAndFreesEverything) {
  std::vector<TensorSpec> s = {Spec("a_big", "F32", {3u << 20}),
                               Spec("b_big", "BF16", {5u << 20}),
                               Spec("c_tail", "U8", {4099})};
  const std::string p = Write("replaced.safetensors", s, 21);
  const std::string other = Write("other.safetensors", s, 22);
  for (auto mode : {HostRegisterMode::kOff, HostRegisterMode::kOn}) {
    auto ck = Checkpoint::Open(p);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    LoadOptions o = Cuda();
    o.host_register = mode;
    o.chunk_bytes = 1 << 20;
    std::atomic<bool> armed{true};
    internal::CudaLoaderHooks hooks;
    hooks.wrap_file = [&](std::unique_ptr<internal::File> f, uint32_t) {
      if (!armed.load()) return f;
      internal::FileFaults ff;
      ff.before_read = [&, p, other](uint64_t n) {
        if (n == 2) {
          // The other file is copied in, so it can be renamed again.
          fs::copy_file(other, other + ".tmp",
                        fs::copy_options::overwrite_existing);
          ASSERT_EQ(std::rename((other + ".tmp").c_str(), p.c_str()), 0);
        }
      };
      return std::unique_ptr<internal::File>(
          new internal::FaultInjectingFile(std::move(f), ff));
    };
    auto loader = internal::CreateCudaLoader(o, hooks);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    size_t before = FreeDeviceBytes();
    auto r = (*loader)->Load(*ck);
    if (mode == HostRegisterMode::kOn && r.ok()) {
      // host-register copies from a mapping: no File reads, no hook. The
      // identity check at the end still runs, but nothing changed.
      continue;
    }
    ASSERT_FALSE(r.ok()) << "a replaced file must fail the load";
    EXPECT_EQ(r.status().code(), StatusCode::kIoError) << r.status().ToString();
    EXPECT_NE(r.status().message().find("replaced by another file"),
              std::string::npos)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find("tensor '"), std::string::npos)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find(p), std::string::npos);
    std::cout << "replaced: " << r.status().ToString() << "\n";
    EXPECT_EQ(FreeDeviceBytes(), before) << "device memory not back";
    armed = false;
    auto ck2 = Checkpoint::Open(p);  // now the other file's bytes
    ASSERT_TRUE(ck2.ok()) << ck2.status().ToString();
    auto r2 = (*loader)->Load(*ck2);
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    EXPECT_EQ(CheckExact(*ck2, *r2), 0);
    Write("replaced.safetensors", s, 21);  // back for the next mode
  }
}

// Out of pinned host memory, for real: a child process (this binary again,
// running DISABLED_PinnedOomChild) starts CUDA, then lowers its
// address-space limit just above what it uses, so the staging ring's
// pinned memory cannot be mapped; creating the loader (or its first load,
// where workers pin their parts) must fail cleanly (ResourceExhausted or
// CudaError naming the pinned staging memory and the size); with
// the limit lifted a loader is created and loads bit-exact. The child
// reports through its exit status and stderr.
TEST_F(CudaLoaderTest, PinnedMemoryExhaustedInAChildIsClean) {
  std::string p = Write("pinned.safetensors", AllDTypeSpecs(), 23);
  const std::string out = dir_ + "/child.log";
  const std::string cmd = "WL_PINNED_OOM_FILE='" + p + "' /proc/" +
                          std::to_string(getpid()) +
                          "/exe --gtest_also_run_disabled_tests "
                          "--gtest_filter='*DISABLED_PinnedOomChild*' > '" +
                          out + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(out);
  std::string said((std::istreambuf_iterator<char>(log)), {});
  std::cout << said;
  ASSERT_TRUE(WIFEXITED(rc)) << said;
  EXPECT_EQ(WEXITSTATUS(rc), 0) << said;
  EXPECT_NE(said.find("pinned staging memory"), std::string::npos) << said;
  EXPECT_NE(said.find("[  PASSED  ] 1 test"), std::string::npos) << said;
}

TEST(CudaLoaderChild, DISABLED_PinnedOomChild) {
  const char* path = getenv("WL_PINNED_OOM_FILE");
  ASSERT_NE(path, nullptr) << "run by PinnedMemoryExhaustedInAChildIsClean";
  std::string why;
  ASSERT_TRUE(internal::CudaDeviceAvailable(0, &why)) << why;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context exists now
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  uint64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const uint64_t vm = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = vm + (64ull << 20);  // the ring below needs 512 MiB
  ASSERT_EQ(setrlimit(RLIMIT_AS, &low), 0);
  LoadOptions o;
  o.device = Device::Cuda(0);
  o.staging_bytes = 512ull << 20;
  auto refused = Loader::Create(o);
  if (refused.ok()) {
    // Pinned memory may be allocated at the first load instead.
    auto r = (*refused)->Load(*ck);
    ASSERT_FALSE(r.ok()) << "pinned allocation succeeded under the limit";
    std::cerr << "refused at load: " << r.status().ToString() << "\n";
    EXPECT_TRUE(r.status().code() == StatusCode::kResourceExhausted ||
                r.status().code() == StatusCode::kCudaError)
        << r.status().ToString();
  } else {
    std::cerr << "refused at create: " << refused.status().ToString() << "\n";
    EXPECT_TRUE(refused.status().code() == StatusCode::kResourceExhausted ||
                refused.status().code() == StatusCode::kCudaError)
        << refused.status().ToString();
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  auto loader = Loader::Create(o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto r = (*loader)->Load(*ck);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const LoadedTensor& t : r->tensors) {
    const TensorInfo* info = ck->Find(t.name);
    ASSERT_NE(info, nullptr);
    std::vector<uint8_t> want(info->size), got(info->size);
    FILE* f = fopen(path, "rb");
    ASSERT_NE(f, nullptr);
    fseeko(f, static_cast<off_t>(info->offset), SEEK_SET);
    ASSERT_EQ(info->size ? fread(want.data(), 1, info->size, f) : 0,
              info->size);
    fclose(f);
    if (info->size) {
      ASSERT_EQ(
          cudaMemcpy(got.data(), t.data, info->size, cudaMemcpyDeviceToHost),
          cudaSuccess);
    }
    EXPECT_EQ(want, got) << t.name;
  }
}

}  // namespace
}  // namespace weightlift
