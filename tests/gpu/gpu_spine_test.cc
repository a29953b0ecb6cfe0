// GPU tests of issue 10's spine (label `gpu`): slices to cuda:0 (row runs
// and strided placements, one cudaMemcpy2DAsync per staging slot) bit-exact
// against a reference gather of the file's bytes, and the GDS path
// (gds_path.cc, cufile_lib.cc) driven in cuFile's compatibility mode
// (gds=compat): registration, alignment (odd offsets), partial reads,
// slices through GDS and the error paths. Each test skips with the reason
// when cuda:0 cannot be used; the GDS tests also when libcufile.so.0 is not
// on this machine. Anything else cuFile refuses is a failure that prints
// cuFile's reason.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_loader.h"
#include "cuda/cufile_lib.h"
#include "cuda/device_available.h"
#include "cuda/gds_path.h"
#include "cuda/register_ahead.h"
#include "cuda/registered_pages.h"
#include "env/env.h"
#include "env/page_cache.h"
#include "format/held_files.h"
#include "gpu_test_fixture.h"
#include "st_builder.h"
#include "util/testing/reference_gather.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/request.h"

namespace weightlift {
namespace {

namespace fs = std::filesystem;
using testing::Spec;
using testing::TensorSpec;

class SpineTest : public testing::GpuFileTest {
 protected:
  // Loads REQ from CK with OPTIONS and checks every result against
  // ReferenceGather of the file's bytes.
  // Returns the report.
  LoadReport LoadAndCheck(const Checkpoint& ck,
                          const std::vector<TensorRequest>& req,
                          const LoadOptions& options) {
    auto loader = Loader::Create(options);
    EXPECT_TRUE(loader.ok()) << loader.status().ToString();
    if (!loader.ok()) return {};
    auto r = (*loader)->LoadSlices(ck, req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_EQ(r->tensors.size(), req.size());
    for (size_t k = 0; k < req.size() && k < r->tensors.size(); ++k) {
      const TensorInfo& t = *ck.Find(req[k].name);
      const int eb = DTypeBits(t.dtype) / 8;
      const std::vector<uint8_t> bytes = FileBytes(ck, t);
      auto want = internal::testing::ReferenceGather<uint8_t>(
          bytes, t.shape, eb, req[k].slices);
      auto got = DeviceBytes(r->tensors[k].data, r->tensors[k].size);
      EXPECT_EQ(got.size(), want.size()) << k << " " << t.name;
      EXPECT_TRUE(got == want)
          << "request " << k << " of '" << t.name << "' differs on the device";
    }
    std::cout << r->report.ToString() << "\n";
    return r->report;
  }

  static LoadOptions Cuda() {
    LoadOptions o;
    o.device = Device::Cuda(0);
    return o;
  }
};

// Row and column slices of a 4096 x 11008 bf16 weight (the Llama MLP
// shape), a 3-D tensor with steps, ints as one-element ranges, the same
// tensor twice, whole tensors; warm (buffered: row runs) and cold
// (O_DIRECT: narrow rows placed with strided copies).
TEST_F(SpineTest, SlicesToCudaMatchReferenceGather) {
  std::string path = Write(
      "slices.safetensors",
      {Spec("mlp", "BF16", {4096, 11008}), Spec("cube", "F32", {7, 33, 65}),
       Spec("narrow", "F16", {3000, 200}), Spec("odd", "U8", {1001})},
      21);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<TensorRequest> req = {
      {"mlp", {{1024, 2048, 1}}},                    // rows: one range
      {"mlp", {{0, 4096, 1}, {2752, 5504, 1}}},      // columns
      {"cube", {{1, 7, 2}, {3, 30, 4}, {5, 6, 1}}},  // steps, an int
      {"narrow", {{0, 3000, 1}, {10, 74, 1}}},       // rows < a block
      {"odd", {}},                                   // whole
      {"narrow", {{2999, 3000, 1}}},                 // the last row
  };
  LoadReport warm = LoadAndCheck(*ck, req, Cuda());
  bool noted = false;
  for (auto& n : warm.notes) noted |= n.find("slices: ") != std::string::npos;
  EXPECT_TRUE(noted);

  ASSERT_TRUE(internal::EvictFromPageCache(path).ok());
  LoadOptions cold = Cuda();
  cold.backend = Backend::kDirect;
  LoadReport r = LoadAndCheck(*ck, req, cold);
  bool strided = false;
  for (auto& n : r.notes) {
    strided |= n.find("slices: ") != std::string::npos &&
               n.find(" 0 strided") == std::string::npos;
  }
  EXPECT_TRUE(strided) << "O_DIRECT: narrow rows should be placed strided";
}

// ---- Pages registered ahead (prepare) ------------------------------------

// Waits until the registration prepare started for CK's next load is done
// (a load takes whatever is done when it begins).
void WaitForRegistration(const Checkpoint& ck) {
  std::shared_ptr<internal::PreparedPages> p =
      internal::HeldFiles::Prepared(ck).Take();
  ASSERT_NE(p, nullptr);
  auto pages = std::dynamic_pointer_cast<internal::RegisteredPages>(p);
  ASSERT_NE(pages, nullptr);
  pages->Wait();
  EXPECT_EQ(pages->registered_bytes(), pages->bytes());
  internal::HeldFiles::Prepared(ck).Put(std::move(p));
}

// Whether NOTES has one starting with PREFIX and holding HAS.
bool NoteHas(const std::vector<std::string>& notes, const std::string& prefix,
             const std::string& has) {
  for (const std::string& n : notes) {
    if (n.rfind(prefix, 0) == 0 && n.find(has) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// A tensor-parallel rank's parts (columns of a row-parallel weight, rows of
// a column-parallel one, a replicated vector, 50-byte runs of 400-byte
// rows) loaded from pages prepare registered, bit-exact every time:
//  - auto registers the column-parallel part and the vector, and leaves the
//    two column slices (whose pages are 8x their bytes) to staging: one run
//    copies the first straight from the page cache and stages the rest, and
//    the report says which and how much;
//  - forced (host_register=on) registers all four: everything is copied in
//    place (one 2D copy per part, so the bytes read are the bytes
//    delivered);
//  - nothing is left for the next load, which stages; pages registered for
//    another request are left for that request's load;
//  - a request whose only part is 8x its bytes is declined, and its load's
//    report says why.
TEST_F(SpineTest, PagesRegisteredAheadAreCopiedStraightFromThePageCache) {
  std::string path =
      Write("ahead.safetensors",
            {Spec("mlp", "BF16", {4096, 11008}), Spec("o", "BF16", {512, 4096}),
             Spec("norm", "F32", {4096}), Spec("narrow", "F16", {3000, 200})},
            22);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<TensorRequest> req = {
      {"mlp", {{0, 4096, 1}, {1376, 2752, 1}}},  // a row-parallel part
      {"o", {{64, 128, 1}}},                     // a column-parallel part
      {"norm", {}},                              // replicated
      {"narrow", {{0, 3000, 1}, {50, 75, 1}}},   // short runs
  };
  const uint64_t in_place_bytes = 64 * 4096 * 2 + 4096 * 4;
  const uint64_t left_bytes = 4096 * 1376 * 2 + 3000 * 25 * 2;
  auto mixed = internal::RegisterPagesAhead(*ck, req, 0, 0.0, false);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->files, 1u);
  EXPECT_EQ(mixed->left_bytes, left_bytes);
  WaitForRegistration(*ck);
  LoadReport m = LoadAndCheck(*ck, req, Cuda());
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].path_taken.rfind("host-register+pinned-staging", 0), 0u)
      << m.files[0].path_taken;
  char in_place[64];
  std::snprintf(in_place, sizeof in_place, "%.1f of its",
                static_cast<double>(in_place_bytes) / 1e6);
  EXPECT_NE(m.files[0].reason.find(in_place), std::string::npos)
      << m.files[0].reason;
  EXPECT_TRUE(NoteHas(m.notes, "prepare registered", "left to staging"));

  auto ahead = internal::RegisterPagesAhead(*ck, req, 0, 0.0, true);
  ASSERT_TRUE(ahead.ok()) << ahead.status().ToString();
  EXPECT_EQ(ahead->files, 1u);
  EXPECT_EQ(ahead->left_bytes, 0u);
  EXPECT_TRUE(ahead->skipped.empty());
  WaitForRegistration(*ck);
  LoadReport r = LoadAndCheck(*ck, req, Cuda());
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].path_taken, "host-register") << r.files[0].reason;
  EXPECT_NE(r.files[0].reason.find("registered by prepare"), std::string::npos)
      << r.files[0].reason;
  EXPECT_EQ(r.bytes_read, r.bytes);
  EXPECT_TRUE(NoteHas(r.notes, "prepare registered", "copied straight"));

  LoadReport again = LoadAndCheck(*ck, req, Cuda());
  ASSERT_EQ(again.files.size(), 1u);
  EXPECT_EQ(again.files[0].path_taken.rfind("pinned-staging", 0), 0u)
      << again.files[0].path_taken;

  // Pages registered for another request are left for it: a load they do
  // not hold stages, and the load they were made for takes them.
  std::vector<TensorRequest> rows_only = {req[1]};
  ASSERT_TRUE(internal::RegisterPagesAhead(*ck, rows_only, 0, 0.0, true).ok());
  WaitForRegistration(*ck);
  LoadReport other = LoadAndCheck(*ck, req, Cuda());
  ASSERT_EQ(other.files.size(), 1u);
  EXPECT_EQ(other.files[0].path_taken.rfind("pinned-staging", 0), 0u);
  LoadReport own = LoadAndCheck(*ck, rows_only, Cuda());
  ASSERT_EQ(own.files.size(), 1u);
  EXPECT_EQ(own.files[0].path_taken, "host-register") << own.files[0].reason;

  // A part whose pages are 8x its bytes alone: declined unless forced, and
  // the load stages saying why.
  std::vector<TensorRequest> row_part = {req[0]};
  auto refused = internal::RegisterPagesAhead(*ck, row_part, 0, 0.0, false);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->files, 0u);
  ASSERT_EQ(refused->skipped.size(), 1u);
  EXPECT_NE(refused->skipped[0].find("not registered ahead"), std::string::npos)
      << refused->skipped[0];
  LoadReport declined = LoadAndCheck(*ck, row_part, Cuda());
  ASSERT_EQ(declined.files.size(), 1u);
  EXPECT_EQ(declined.files[0].path_taken.rfind("pinned-staging", 0), 0u);
  EXPECT_TRUE(NoteHas(declined.notes,
                      "prepare registered no pages ahead of this load",
                      "host_register=on"))
      << "the report should say why prepare registered nothing";

  // host_register=off leaves them alone.
  ASSERT_TRUE(internal::RegisterPagesAhead(*ck, req, 0, 0.0, true).ok());
  WaitForRegistration(*ck);
  LoadOptions off = Cuda();
  off.host_register = HostRegisterMode::kOff;
  LoadReport staged = LoadAndCheck(*ck, req, off);
  ASSERT_EQ(staged.files.size(), 1u);
  EXPECT_EQ(staged.files[0].path_taken.rfind("pinned-staging", 0), 0u);
}

// ---- GDS in cuFile's compatibility mode -----------------------------------

class GdsCompatTest : public SpineTest {
 protected:
  void SetUp() override {
    SpineTest::SetUp();
    if (IsSkipped()) return;
    if (dlopen_ok_ < 0) {
      void* dl = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
      dlopen_ok_ = dl != nullptr;
    }
    if (!dlopen_ok_) GTEST_SKIP() << "libcufile.so.0 is not on this machine";
    auto lib = internal::CuFileLib::Get(/*compat=*/true);
    ASSERT_TRUE(lib.ok()) << "cuFile compatibility mode cannot run here: "
                          << lib.status().ToString();
    ASSERT_TRUE((*lib)->compat());
  }
  static inline int dlopen_ok_ = -1;

  static LoadOptions Compat() {
    LoadOptions o = Cuda();
    o.gds = GdsMode::kCompat;
    return o;
  }
};

// Whole tensors at odd offsets and odd sizes (every dtype's alignment),
// registration reported, bit-exact, cold and warm.
TEST_F(GdsCompatTest, WholeTensorsAtOddOffsetsBitExact) {
  std::vector<TensorSpec> specs = {
      Spec("a_u8", "U8", {4099}),       Spec("b_bf16", "BF16", {1537, 1031}),
      Spec("c_f32", "F32", {129, 257}), Spec("d_i8", "I8", {33, 3}),
      Spec("e_f64", "F64", {31}),       Spec("f_empty", "F32", {0, 4}),
      Spec("g_big", "F16", {5u << 20}), Spec("h_tail", "U8", {4097}),
  };
  std::string path = Write("compat.safetensors", specs, 31, /*pad=*/false);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  ASSERT_EQ(ck->files()[0].data_offset % 2, 1u) << "want odd offsets";
  std::vector<TensorRequest> req;
  for (const TensorInfo& t : ck->tensors()) req.push_back({t.name, {}});
  for (bool cold : {true, false}) {
    if (cold) {
      ASSERT_TRUE(internal::EvictFromPageCache(path).ok());
    }
    LoadReport r = LoadAndCheck(*ck, req, Compat());
    ASSERT_EQ(r.files.size(), 1u);
    EXPECT_EQ(r.files[0].path_taken, "gds-compat");
    EXPECT_NE(r.files[0].reason.find("compatibility mode"), std::string::npos)
        << r.files[0].reason;
    EXPECT_EQ(r.bytes, ck->total_bytes());
  }
}

// Slices through GDS: no staging to place a stride from, so row runs, each
// one cuFileRead at an unaligned offset of an unaligned length.
TEST_F(GdsCompatTest, SlicesAreRowRunsAtUnalignedOffsets) {
  std::string path =
      Write("gds_slices.safetensors",
            {Spec("w", "BF16", {512, 3001}), Spec("v", "F32", {1, 70001})}, 32);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  std::vector<TensorRequest> req = {
      {"w", {{3, 500, 7}, {11, 2000, 1}}},
      {"w", {{100, 101, 1}}},
      {"v", {{0, 1, 1}, {3, 69999, 1}}},
  };
  LoadReport r = LoadAndCheck(*ck, req, Compat());
  bool runs = false;
  for (auto& n : r.notes) {
    runs |= n.find(" 0 strided") != std::string::npos;
  }
  EXPECT_TRUE(runs) << "GDS slices must be row runs, never strided";
}

// Partial reads straight through CuFileLib: every offset/length residue
// around a 4 KiB boundary, and a read past the end of the file, which is an
// IoError naming the path and the offset.
TEST_F(GdsCompatTest, PartialReadsAndReadPastEndOfFile) {
  std::string path =
      Write("raw.safetensors", {Spec("x", "U8", {3u << 20})}, 33);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok());
  const TensorInfo& t = ck->tensors()[0];
  const std::vector<uint8_t> file = FileBytes(*ck, t);
  auto held = internal::OpenFile(path, Backend::kPread);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto gf = internal::GdsFile::Open(**held, /*compat=*/true);
  ASSERT_TRUE(gf.ok()) << "cuFileHandleRegister in compat mode: "
                       << gf.status().ToString();
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
  for (uint64_t off : {0u, 1u, 7u, 4095u, 4096u, 4097u, 65535u}) {
    for (uint64_t len : {1u, 511u, 4096u, 4097u, 300000u}) {
      ASSERT_TRUE(
          gf->lib()->Read(gf->handle(), dev, len, t.offset + off, path).ok());
      auto got = DeviceBytes(dev, len);
      ASSERT_EQ(std::memcmp(got.data(), file.data() + off, len), 0)
          << "offset " << off << " length " << len;
    }
  }
  const uint64_t size = ck->files()[0].size;
  Status past = gf->lib()->Read(gf->handle(), dev, 8192, size - 100, path);
  EXPECT_FALSE(past.ok()) << "a read past the end of the file must fail";
  EXPECT_EQ(past.code(), StatusCode::kIoError) << past.ToString();
  EXPECT_NE(past.message().find(path), std::string::npos) << past.ToString();
  EXPECT_NE(past.message().find(std::to_string(size)), std::string::npos)
      << past.ToString();
  std::cout << "past EOF: " << past.ToString() << "\n";
  cudaFree(dev);
}

// Error paths of a load: a file on tmpfs (no O_DIRECT: cuFile cannot take
// it, and gds=compat asked for cuFile by name) and a file that shrank after
// its header was read. Both fail naming the file, with every byte of
// device memory given back, and the loader loads again afterwards.
TEST_F(GdsCompatTest, RefusalsAndTruncationFailCleanly) {
  std::string path =
      Write("trunc.safetensors",
            {Spec("a", "F32", {3u << 20}), Spec("b", "F32", {1000})}, 34);
  auto ck = Checkpoint::Open(path);
  ASSERT_TRUE(ck.ok());
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  auto loader = Loader::Create(Compat());
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  size_t free0 = 0, total = 0;
  cudaDeviceSynchronize();
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  auto r = (*loader)->Load(*ck);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trunc.safetensors"), std::string::npos)
      << r.status().ToString();
  std::cout << "truncated: " << r.status().ToString() << "\n";
  size_t free1 = 0;
  cudaDeviceSynchronize();
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0) << "device memory not given back";

  if (fs::is_directory("/dev/shm")) {
    std::string shm = testing::MakeTempDir("/dev/shm", "wl_spine");
    ASSERT_FALSE(shm.empty());
    std::string err;
    auto f = testing::WriteSafetensors(
        shm + "/m.safetensors", {Spec("t", "U8", {100000})}, 35, true, &err);
    ASSERT_FALSE(f.path.empty()) << err;
    auto ck2 = Checkpoint::Open(f.path);
    ASSERT_TRUE(ck2.ok());
    auto r2 = (*loader)->Load(*ck2);
    if (r2.ok()) {
      // Some cuFile versions read tmpfs in compatibility mode anyway.
      std::cout << "tmpfs under gds=compat: " << r2->report.ToString();
    } else {
      EXPECT_EQ(r2.status().code(), StatusCode::kUnsupported)
          << r2.status().ToString();
      EXPECT_NE(r2.status().message().find("m.safetensors"), std::string::npos)
          << r2.status().ToString();
      std::cout << "tmpfs under gds=compat: " << r2.status().ToString() << "\n";
    }
    std::error_code ec;
    fs::remove_all(shm, ec);
  }
  // Still usable.
  std::string ok =
      Write("after.safetensors", {Spec("c", "BF16", {777, 5})}, 36);
  auto ck3 = Checkpoint::Open(ok);
  ASSERT_TRUE(ck3.ok());
  LoadAndCheck(*ck3, {{"c", {}}}, Compat());
}

}  // namespace
}  // namespace weightlift
