// Group loads over NCCL as a C++ caller makes them (weightlift/nccl.h:
// MakeNcclId, JoinNcclGroup over NcclCommunicator): one rank per CUDA device,
// the ranks as threads of one process (NCCL allows one member of a communicator
// per thread, each on its own device). One GPU runs a group of one (the
// agreement and the load's memory over NCCL, no peer); two or more run a rank
// on each, up to 8. Every tensor is copied back to the host and compared with
// the file's own bytes. Without a GPU (the development and CI machines) every
// test skips with that reason; bench/h200_tp.sh runs them with torch's libnccl.
#ifdef WL_HAVE_NCCL_COMMUNICATOR

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/device_available.h"
#include "dist/nccl_lib.h"
#include "dist/testing/group_checks.h"
#include "weightlift/group.h"
#include "weightlift/loader.h"
#include "weightlift/nccl.h"

namespace weightlift::internal {
namespace {

using std::chrono::milliseconds;
using testing::FilesOf;
using testing::PartBytes;
using testing::SplitBothWaysPlan;
using testing::SynthDir;

// How many ranks this machine can run (one per GPU, at most 8); 0 with
// WHY set when it cannot run NCCL at all.
int RanksHere(std::string* why) {
  if (!CudaDeviceAvailable(0, why)) {
    *why = "no usable CUDA device: " + *why;
    return 0;
  }
  if (auto lib = NcclLib::Get(); !lib.ok()) {
    *why = lib.status().ToString();
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  return std::min(devices, 8);
}

struct RankOutcome {
  Status status;
  LoadResult result;
  // The result's tensors copied to the host, in its order.
  std::vector<std::vector<uint8_t>> host;
};

// Rank r of N joins one NCCL communicator on cuda:r and group-loads
// CKPTS[r] (each rank its own copy, as on separate hosts) with a CUDA
// loader on cuda:r, then copies its tensors back.
std::vector<RankOutcome> RunOverNccl(
    const std::vector<const Checkpoint*>& ckpts,
    const std::function<GroupLoadRequest(int)>& request) {
  const int n = static_cast<int>(ckpts.size());
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  auto id = MakeNcclId();
  if (!id.ok()) {
    for (auto& o : out) o.status = id.status();
    return out;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      RankOutcome& mine = out[static_cast<size_t>(r)];
      auto comm = JoinNcclGroup(*id, r, n, r, milliseconds(60000));
      if (!comm.ok()) {
        mine.status = comm.status();
        return;
      }
      LoadOptions o;
      o.device = Device::Cuda(r);
      o.threads = 2;
      o.backend = Backend::kPread;  // no alignment: every byte read once
      auto loader = Loader::Create(o);
      if (!loader.ok()) {
        mine.status = loader.status();
        return;
      }
      auto got = LoadWithGroup(**loader, *ckpts[static_cast<size_t>(r)], **comm,
                               request(r));
      if (!got.ok()) {
        mine.status = got.status();
        return;
      }
      mine.result = std::move(*got);
      if (cudaSetDevice(r) != cudaSuccess) {
        mine.status = Status(StatusCode::kCudaError, "cudaSetDevice");
        return;
      }
      for (const LoadedTensor& t : mine.result.tensors) {
        std::vector<uint8_t> bytes(t.size);
        if (t.size > 0 && cudaMemcpy(bytes.data(), t.data, t.size,
                                     cudaMemcpyDeviceToHost) != cudaSuccess) {
          mine.status = Status(StatusCode::kCudaError, "copy back " + t.name);
          return;
        }
        mine.host.push_back(std::move(bytes));
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(NcclGroupLoad, FullModeEveryRankGetsEveryTensorBitExact) {
  std::string why;
  const int n = RanksHere(&why);
  if (n == 0) GTEST_SKIP() << why;
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  // Small batches and a low all-gather floor: the tiny layout then takes
  // broadcasts and all-gathers, in several batches.
  auto results =
      RunOverNccl(std::vector<const Checkpoint*>(n, &*ckpt), [](int) {
        GroupLoadRequest req;
        req.allgather_min_bytes = 64 << 10;
        req.batch_bytes = 1 << 20;
        return req;
      });
  uint64_t read = 0;
  for (int r = 0; r < n; ++r) {
    const RankOutcome& ro = results[static_cast<size_t>(r)];
    ASSERT_TRUE(ro.status.ok()) << "rank " << r << ": " << ro.status.ToString();
    ASSERT_EQ(ro.host.size(), ckpt->tensors().size());
    for (size_t i = 0; i < ckpt->tensors().size(); ++i) {
      const TensorInfo& t = ckpt->tensors()[i];
      EXPECT_EQ(ro.result.tensors[i].device, Device::Cuda(r)) << t.name;
      ASSERT_EQ(ro.host[i].size(), t.size) << t.name;
      EXPECT_EQ(std::memcmp(ro.host[i].data(), files[t.file].data() + t.offset,
                            t.size),
                0)
          << "n=" << n << " rank " << r << " " << t.name;
    }
    read += ro.result.report.bytes_read;
  }
  EXPECT_EQ(read, ckpt->total_bytes()) << "each byte read once in the group";
}

TEST(NcclGroupLoad, TensorParallelPartsBitExact) {
  std::string why;
  const int n = RanksHere(&why);
  if (n == 0) GTEST_SKIP() << why;
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  const std::vector<TpPlanEntry> plan = SplitBothWaysPlan();
  auto results =
      RunOverNccl(std::vector<const Checkpoint*>(n, &*ckpt), [&](int r) {
        GroupLoadRequest req;
        req.tensor_parallel = true;
        req.tp.rank = r;
        req.tp.size = n;
        req.tp.plan = plan;
        return req;
      });
  for (int r = 0; r < n; ++r) {
    const RankOutcome& ro = results[static_cast<size_t>(r)];
    ASSERT_TRUE(ro.status.ok()) << "rank " << r << ": " << ro.status.ToString();
    TensorParallel tp;
    tp.rank = r;
    tp.size = n;
    tp.plan = plan;
    auto shards = ShardTensors(ckpt->tensors(), tp);
    ASSERT_TRUE(shards.ok());
    ASSERT_EQ(ro.host.size(), ckpt->tensors().size());
    for (size_t i = 0; i < ckpt->tensors().size(); ++i) {
      const TensorInfo& t = ckpt->tensors()[i];
      const TensorShard& s = shards->shards[i];
      EXPECT_EQ(ro.result.tensors[i].shape, s.shape) << t.name;
      const auto want = PartBytes(files[t.file], t, s);
      ASSERT_EQ(ro.host[i].size(), want.size()) << t.name;
      EXPECT_EQ(std::memcmp(ro.host[i].data(), want.data(), want.size()), 0)
          << "n=" << n << " rank " << r << " " << t.name;
    }
  }
}

// Ranks whose checkpoints hold other weights of one layout fail together in
// the agreement, over NCCL, before any data moves; nothing hangs.
TEST(NcclGroupLoad, RanksWithOtherWeightsFailTogether) {
  std::string why;
  const int n = RanksHere(&why);
  if (n == 0) GTEST_SKIP() << why;
  if (n < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices (one rank each); this machine has "
                 << n;
  }
  SynthDir a(7), b(8);
  auto ca = Checkpoint::Open(a.path);
  auto cb = Checkpoint::Open(b.path);
  ASSERT_TRUE(ca.ok() && cb.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto results =
      RunOverNccl({&*ca, &*cb}, [](int) { return GroupLoadRequest{}; });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(50));
  for (const RankOutcome& ro : results) {
    ASSERT_FALSE(ro.status.ok());
    EXPECT_EQ(ro.status.code(), StatusCode::kInvalidArgument)
        << ro.status.ToString();
    EXPECT_NE(ro.status.message().find("ranks disagree"), std::string::npos)
        << ro.status.ToString();
  }
}

}  // namespace
}  // namespace weightlift::internal

#endif  // WL_HAVE_NCCL_COMMUNICATOR
