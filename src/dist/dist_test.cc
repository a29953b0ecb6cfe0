#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dist/group_exec.h"
#include "dist/nccl_lib.h"
#include "dist/tensor_sample.h"
#include "dist/testing/group_checks.h"
#include "dist/thread_group.h"
#include "env/env.h"
#include "env/fault_file.h"
#include "format/held_files.h"
#include "format/synth.h"
#include "format/testing/tensor_info.h"
#include "weightlift/group.h"
#include "weightlift/loader.h"
#include "weightlift/nccl.h"

#ifdef WL_HAVE_NCCL_COMMUNICATOR
#include <cuda_runtime.h>

#include "dist/nccl_communicator.h"
#endif

namespace weightlift::internal {
namespace {

using std::chrono::milliseconds;
using testing::FileBytes;
using testing::FilesOf;
using testing::PartBytes;
using testing::SplitBothWaysPlan;
using testing::SynthDir;
using testing::Tensor;

// A small Llama-shaped set with uneven and empty tensors.
std::vector<TensorInfo> Tensors() {
  std::vector<TensorInfo> ts = {Tensor("embed", {500, 64})};
  for (int i = 0; i < 3; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    ts.push_back(Tensor(p + "q_proj.weight", {64, 64}));
    ts.push_back(Tensor(p + "k_proj.weight", {24, 64}));
    ts.push_back(Tensor(p + "o_proj.weight", {64, 64}));
    ts.push_back(Tensor(p + "up_proj.weight", {172, 64}));
    ts.push_back(Tensor(p + "down_proj.weight", {64, 172}));
    ts.push_back(Tensor(p + "norm.weight", {64}));
  }
  ts.push_back(Tensor("empty", {0, 64}));
  ts.push_back(Tensor("lm_head.weight", {512, 64}));
  return ts;
}

// Runs PLAN on N threads over a ThreadGroup: each rank fills only what the
// plan says it reads, then the collectives deliver the rest. Every rank
// must end with every non-local tensor's bytes.
void RunAndCheck(const std::vector<TensorInfo>& ts, const GroupPlan& plan,
                 int n) {
  std::mt19937_64 rng(5);
  std::vector<std::vector<uint8_t>> data(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    data[i].resize(ts[i].size);
    for (auto& b : data[i]) b = static_cast<uint8_t>(rng());
  }
  ThreadGroup group(n, milliseconds(20000));
  std::vector<std::vector<std::vector<uint8_t>>> got(static_cast<size_t>(n));
  std::vector<Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto& mine = got[static_cast<size_t>(r)];
      mine.resize(ts.size());
      std::vector<void*> bufs(ts.size(), nullptr);
      for (size_t i = 0; i < ts.size(); ++i) {
        const GroupStep& s = plan.steps[i];
        if (s.delivery == Delivery::kLocal) continue;
        mine[i].assign(ts[i].size, 0);
        bufs[i] = mine[i].data();
        if (s.delivery == Delivery::kBroadcast && s.root == r) {
          mine[i] = data[i];
          bufs[i] = mine[i].data();
        } else if (s.delivery == Delivery::kAllGather) {
          const uint64_t at = static_cast<uint64_t>(r) * s.part_bytes;
          std::memcpy(mine[i].data() + at, data[i].data() + at, s.part_bytes);
        }
      }
      for (uint32_t b = 0; b < plan.batches; ++b) {
        Status st = RunBatch(plan, ts, b, bufs, group.rank(r));
        if (!st.ok()) {
          status[static_cast<size_t>(r)] = st;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[static_cast<size_t>(r)].ok())
        << status[static_cast<size_t>(r)].ToString();
    for (size_t i = 0; i < ts.size(); ++i) {
      if (plan.steps[i].delivery == Delivery::kLocal) continue;
      EXPECT_EQ(got[static_cast<size_t>(r)][i], data[i])
          << "rank " << r << " tensor " << ts[i].name;
    }
  }
}

TEST(GroupExec, FullModeDeliversEveryTensorToEveryRank) {
  const auto ts = Tensors();
  for (int n : {1, 2, 3, 4, 8}) {
    GroupPlanOptions o;
    o.allgather_min_bytes = 8 << 10;  // some all-gathers at this size
    o.batch_bytes = 64 << 10;         // several batches
    GroupPlan plan = PlanFullGroup(ts, n, o);
    bool gathered = false;
    for (const auto& s : plan.steps) {
      gathered |= s.delivery == Delivery::kAllGather;
    }
    EXPECT_EQ(gathered, n == 2 || n == 4 || n == 8) << n;
    RunAndCheck(ts, plan, n);
  }
}

TEST(GroupExec, ShardedModeMovesOnlyReplicatedTensors) {
  const auto ts = Tensors();
  TensorParallel tp;
  tp.size = 4;
  tp.plan = {{"*_proj.weight", ShardStyle::kColwise}};
  auto shards = ShardTensors(ts, tp);
  ASSERT_TRUE(shards.ok());
  GroupPlanOptions o;
  o.allgather_min_bytes = 8 << 10;
  GroupPlan plan = PlanShardedGroup(ts, *shards, 4, o);
  std::vector<void*> none(ts.size(), nullptr);
  for (uint32_t b = 0; b < plan.batches; ++b) {
    for (const Collective& c : BatchCollectives(plan, ts, b, none)) {
      EXPECT_FALSE(shards->shards[c.tensor].is_split()) << ts[c.tensor].name;
      EXPECT_NE(ts[c.tensor].size, 0u);
    }
  }
  RunAndCheck(ts, plan, 4);
}

TEST(ThreadGroup, AMissingRankTimesOutInsteadOfHanging) {
  ThreadGroup group(2, milliseconds(300));
  std::vector<uint8_t> buf(16, 1);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = group.rank(0).Broadcast(buf.data(), buf.size(), 0);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("not every rank joined within 300 ms"),
            std::string::npos);
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Broken for good: the next collective fails at once.
  EXPECT_FALSE(group.rank(1).Broadcast(buf.data(), buf.size(), 0).ok());
}

TEST(NcclCalls, CollectivesBecomeInPlaceNcclCalls) {
  std::vector<uint8_t> buf(4 * 1024);
  NcclCall b = BroadcastCall(buf.data(), buf.size(), 3);
  EXPECT_EQ(b.op, NcclCall::Op::kBroadcast);
  EXPECT_EQ(b.sendbuff, buf.data());
  EXPECT_EQ(b.recvbuff, buf.data());
  EXPECT_EQ(b.count, buf.size());
  EXPECT_EQ(b.root, 3);
  NcclCall g = AllGatherCall(buf.data(), 1024, 2);
  EXPECT_EQ(g.op, NcclCall::Op::kAllGather);
  EXPECT_EQ(g.sendbuff, buf.data() + 2048);  // rank 2's part, in place
  EXPECT_EQ(g.recvbuff, buf.data());
  EXPECT_EQ(g.count, 1024u);

  // A Llama-7B full-mode plan over 8 GPUs: every collective's NCCL call
  // stays inside its tensor's buffer and all-gathers tile it exactly.
  auto layout = LayoutTensors("llama2-7b");
  ASSERT_TRUE(layout.ok());
  std::vector<TensorInfo> ts;
  for (const auto& t : *layout) ts.push_back(Tensor(t.name, t.shape));
  GroupPlan plan = PlanFullGroup(ts, 8, {});
  std::vector<void*> bufs(ts.size());
  uint64_t moved = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    bufs[i] = reinterpret_cast<void*>((uint64_t{i} + 1) << 40);  // no memory
  }
  for (uint32_t b = 0; b < plan.batches; ++b) {
    for (const Collective& c : BatchCollectives(plan, ts, b, bufs)) {
      const auto base = reinterpret_cast<uintptr_t>(bufs[c.tensor]);
      for (int r = 0; r < 8; ++r) {
        NcclCall call = c.kind == Collective::Kind::kBroadcast
                            ? BroadcastCall(c.data, c.bytes, c.root)
                            : AllGatherCall(c.data, c.bytes, r);
        const auto send = reinterpret_cast<uintptr_t>(call.sendbuff);
        EXPECT_GE(send, base);
        EXPECT_LE(send + call.count, base + ts[c.tensor].size);
        if (c.kind == Collective::Kind::kAllGather) {
          EXPECT_EQ(call.count * 8, ts[c.tensor].size);
        }
      }
      moved += ts[c.tensor].size;
    }
  }
  uint64_t total = 0;
  for (const auto& t : ts) total += t.size;
  EXPECT_EQ(moved, total);
}

TEST(NcclLib, LoadsAtRunTimeOrSaysWhy) {
  StatusOr<const NcclLib*> lib = NcclLib::Get();
  if (!lib.ok()) {
    EXPECT_EQ(lib.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(lib.status().message().find("libnccl"), std::string::npos);
    return;
  }
  int version = 0;
  EXPECT_EQ((*lib)->get_version(&version), kNcclSuccess);
  EXPECT_GE(version, 20000);  // NCCL 2.x encodes 2.28.9 as 22809
  EXPECT_NE((*lib)->ErrorText(2).find("ncclSystemError (2)"),
            std::string::npos);
}

#ifdef WL_HAVE_NCCL_COMMUNICATOR
TEST(NcclCommunicator, OneRankOnThisMachineOrAClearError) {
  if (!NcclLib::Get().ok()) {
    auto id = NcclCommunicator::MakeUniqueId();
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kUnsupported);
    return;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  auto id = NcclCommunicator::MakeUniqueId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto comm = NcclCommunicator::Create(*id, 0, 1, 0, milliseconds(10000));
  if (devices == 0) {  // this development machine: no GPU
    ASSERT_FALSE(comm.ok());
    EXPECT_EQ(comm.status().code(), StatusCode::kCudaError);
    EXPECT_NE(comm.status().message().find("cudaSetDevice(0)"),
              std::string::npos);
    return;
  }
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
  EXPECT_TRUE((*comm)->Broadcast(dev, 1 << 20, 0).ok());
  EXPECT_TRUE((*comm)->AllGather(dev, 1 << 20).ok());
  // A batch's list: enqueued in order, one wait; a bad root names its
  // place in the list.
  char* base = static_cast<char*>(dev);
  const GroupCollective list[] = {
      {GroupCollective::Kind::kBroadcast, base, 4096, 0},
      {GroupCollective::Kind::kAllGather, base + 4096, 4096, -1},
      {GroupCollective::Kind::kBroadcast, base + 8192, 16, 1}};
  size_t failed = 99;
  EXPECT_TRUE((*comm)->RunAll(std::span(list, 2), &failed).ok());
  EXPECT_EQ((*comm)->RunAll(list, &failed).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(failed, 2u);
  EXPECT_EQ((*comm)->Broadcast(dev, 16, 1).code(),
            StatusCode::kInvalidArgument);
  cudaFree(dev);
}
// Rank 0 of a 2-rank communicator whose rank 1 never comes: the
// non-blocking init must give up at the timeout and abort, not hang. Runs
// on one GPU; here (no GPU) the CUDA error comes first.
TEST(NcclCommunicator, ARankThatNeverJoinsTimesOutTheInit) {
  auto id = NcclCommunicator::MakeUniqueId();
  if (!NcclLib::Get().ok()) {  // a machine without libnccl says so
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kUnsupported);
    return;
  }
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (devices > 0 && (*NcclLib::Get())->comm_init_rank_config == nullptr) {
    // The blocking init would wait for rank 1 for ever.
    GTEST_SKIP() << "NCCL < 2.14 on this GPU machine: no non-blocking init";
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto comm = NcclCommunicator::Create(*id, 0, 2, 0, milliseconds(3000));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(comm.ok());
  if (devices == 0) {
    EXPECT_EQ(comm.status().code(), StatusCode::kCudaError);
    return;
  }
  EXPECT_EQ(comm.status().code(), StatusCode::kIoError);
  EXPECT_NE(comm.status().message().find("did not complete within 3000 ms"),
            std::string::npos)
      << comm.status().ToString();
  EXPECT_LT(waited, std::chrono::seconds(20));
}

#endif

// ---- LoadWithGroup: real files, the host loader, ranks as threads --------

struct RankResult {
  Status status;
  LoadResult result;
  std::unique_ptr<Loader> loader;  // the rank's, after its load
};

// How RunGroupLoad runs its group: the collectives' timeout, and what
// each rank's transport is (WRAP: made over the ThreadGroup's rank r;
// by default that rank itself).
struct GroupRun {
  milliseconds timeout{30000};
  std::function<std::unique_ptr<GroupTransport>(GroupTransport&, int)> wrap;
  // Rank r's LoadCallbacks (none by default).
  std::function<LoadCallbacks(int)> callbacks;
};

// Rank r loads CKPTS[r] (each rank its own copy, as on separate hosts).
std::vector<RankResult> RunGroupLoad(
    const std::vector<const Checkpoint*>& ckpts,
    const std::function<GroupLoadRequest(int)>& request,
    const GroupRun& run = {}) {
  const int n = static_cast<int>(ckpts.size());
  ThreadGroup group(n, run.timeout);
  std::vector<RankResult> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      LoadOptions o;
      o.threads = 1;
      o.staging_bytes = 8u << 20;
      o.backend = Backend::kPread;
      auto loader = Loader::Create(o);
      RankResult& mine = out[static_cast<size_t>(r)];
      if (!loader.ok()) {
        mine.status = loader.status();
        return;
      }
      mine.loader = std::move(*loader);
      std::unique_ptr<GroupTransport> wrapped =
          run.wrap ? run.wrap(group.rank(r), r) : nullptr;
      auto got =
          LoadWithGroup(*mine.loader, *ckpts[static_cast<size_t>(r)],
                        wrapped ? *wrapped : group.rank(r), request(r),
                        run.callbacks ? run.callbacks(r) : LoadCallbacks{});
      if (got.ok()) {
        mine.result = std::move(*got);
      } else {
        mine.status = got.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<RankResult> RunGroupLoad(
    const Checkpoint& ckpt, int n,
    const std::function<GroupLoadRequest(int)>& request) {
  return RunGroupLoad(std::vector<const Checkpoint*>(n, &ckpt), request);
}

TEST(LoadWithGroup, FullModeEveryRankGetsEveryTensorReadingAShare) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  for (int n : {1, 2, 3, 4}) {
    auto results = RunGroupLoad(*ckpt, n, [](int) {
      GroupLoadRequest req;
      req.allgather_min_bytes = 64 << 10;  // the tiny layout gathers some
      req.batch_bytes = 1 << 20;
      return req;
    });
    uint64_t read = 0;
    for (int r = 0; r < n; ++r) {
      const RankResult& rr = results[static_cast<size_t>(r)];
      ASSERT_TRUE(rr.status.ok()) << rr.status.ToString();
      ASSERT_EQ(rr.result.tensors.size(), ckpt->tensors().size());
      for (size_t i = 0; i < ckpt->tensors().size(); ++i) {
        const TensorInfo& t = ckpt->tensors()[i];
        const LoadedTensor& lt = rr.result.tensors[i];
        ASSERT_EQ(lt.size, t.size);
        EXPECT_EQ(std::memcmp(lt.data, files[t.file].data() + t.offset, t.size),
                  0)
            << "n=" << n << " rank " << r << " " << t.name;
      }
      read += rr.result.report.bytes_read;
      // The report's files: each of the checkpoint's once, with what this
      // rank read of it over all its batches.
      const LoadReport& rep = rr.result.report;
      ASSERT_EQ(rep.files.size(), ckpt->files().size()) << "rank " << r;
      uint64_t file_bytes = 0;
      for (size_t f = 0; f < rep.files.size(); ++f) {
        EXPECT_EQ(rep.files[f].path, ckpt->files()[f].path) << "rank " << r;
        file_bytes += rep.files[f].bytes;
      }
      EXPECT_EQ(file_bytes, rep.bytes_read) << "n=" << n << " rank " << r;
    }
    // Each byte read once in the group (pread: no alignment overhead).
    EXPECT_EQ(read, ckpt->total_bytes()) << "n=" << n;
  }
}

TEST(LoadWithGroup, TensorParallelPartsAndReplicatedTensorsReadOnce) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  const std::vector<TpPlanEntry> plan = SplitBothWaysPlan();
  const int n = 3;
  // Small batches: the report adds up several batches' loads.
  auto results = RunGroupLoad(*ckpt, n, [&](int r) {
    GroupLoadRequest req;
    req.tensor_parallel = true;
    req.tp.rank = r;
    req.tp.size = n;
    req.tp.plan = plan;
    req.batch_bytes = 256 << 10;
    return req;
  });
  uint64_t read = 0;
  for (int r = 0; r < n; ++r) {
    const RankResult& rr = results[static_cast<size_t>(r)];
    ASSERT_TRUE(rr.status.ok()) << rr.status.ToString();
    // The report adds up the batches' whole-tensor reads and part reads;
    // a note of several batches is said once.
    const LoadReport& rep = rr.result.report;
    read += rep.bytes_read;
    EXPECT_EQ(std::set<std::string>(rep.notes.begin(), rep.notes.end()).size(),
              rep.notes.size())
        << "rank " << r << ": a note repeats";
    EXPECT_FALSE(rep.files.empty()) << "rank " << r;
    TensorParallel tp;
    tp.rank = r;
    tp.size = n;
    tp.plan = plan;
    auto shards = ShardTensors(ckpt->tensors(), tp);
    ASSERT_TRUE(shards.ok());
    // Counted notes are said once for the whole load, with the batches'
    // counts added up: every split part was a slice of this rank's, and
    // every read landed somewhere.
    const std::string batches = rep.notes.empty() ? "" : rep.notes[0];
    EXPECT_EQ(batches.find(" 1 batches"), std::string::npos) << batches;
    auto said = [&](const std::string& start) {
      return std::count_if(
          rep.notes.begin(), rep.notes.end(),
          [&](const std::string& note) { return note.starts_with(start); });
    };
    EXPECT_EQ(said("slices: "), 1) << "rank " << r;
    EXPECT_EQ(rep.counts.slice_bytes_selected, shards->split_bytes)
        << "rank " << r;
    EXPECT_GT(rep.counts.direct_reads + rep.counts.bounced_reads, 0u);
    EXPECT_LE(std::count_if(rep.notes.begin(), rep.notes.end(),
                            [](const std::string& note) {
                              return note.find("bounce buffer") !=
                                     std::string::npos;
                            }),
              1)
        << "rank " << r;
    for (size_t i = 0; i < ckpt->tensors().size(); ++i) {
      const TensorInfo& t = ckpt->tensors()[i];
      const TensorShard& s = shards->shards[i];
      const LoadedTensor& lt = rr.result.tensors[i];
      EXPECT_EQ(lt.shape, s.shape) << t.name;
      const auto want = PartBytes(files[t.file], t, s);
      ASSERT_EQ(lt.size, want.size()) << t.name;
      EXPECT_EQ(std::memcmp(lt.data, want.data(), want.size()), 0)
          << "rank " << r << " " << t.name;
    }
  }
  // The parts of a split tensor make it whole and a replicated tensor is
  // read by one rank: the group read every byte once (pread: no alignment).
  EXPECT_EQ(read, ckpt->total_bytes());
}

TEST(LoadWithGroup, RanksThatDisagreeFailTogetherBeforeDataMoves) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  auto results = RunGroupLoad(*ckpt, 2, [](int r) {
    GroupLoadRequest req;
    req.tensor_parallel = true;
    req.tp.rank = r;
    req.tp.size = 2;
    req.tp.plan = {{"*.q_proj.weight",
                    r == 0 ? ShardStyle::kColwise : ShardStyle::kRowwise}};
    return req;
  });
  for (const RankResult& rr : results) {
    ASSERT_FALSE(rr.status.ok());
    EXPECT_EQ(rr.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(rr.status.message().find("ranks disagree"), std::string::npos);
    EXPECT_NE(rr.status.message().find("ranks [0]"), std::string::npos);
    EXPECT_NE(rr.status.message().find("ranks [1]"), std::string::npos);
  }
  auto bad = RunGroupLoad(*ckpt, 2, [](int r) {
    GroupLoadRequest req;
    req.tensor_parallel = true;
    req.tp.rank = r == 1 ? 5 : r;
    req.tp.size = 2;
    return req;
  });
  EXPECT_NE(bad[0].status.message().find("rank 1 could not start the load"),
            std::string::npos)
      << bad[0].status.ToString();
  EXPECT_NE(bad[1].status.message().find("tp_rank=5"), std::string::npos);
}

// Two checkpoints of one layout with different weights (synthesized from
// two seeds, as two fine-tunes of one model): the layout fingerprint alone
// cannot tell them apart, the sample of tensor bytes can. The sample is the
// same for the same bytes, different for other bytes, and empty for a
// checkpoint built by hand (no files to read).
TEST(TensorSample, SameLayoutOtherWeightsDiffer) {
  SynthDir a(7), b(8), c(7);
  auto ca = Checkpoint::Open(a.path);
  auto cb = Checkpoint::Open(b.path);
  auto cc = Checkpoint::Open(c.path);
  ASSERT_TRUE(ca.ok() && cb.ok() && cc.ok());
  ASSERT_EQ(ca->tensors().size(), cb->tensors().size());
  for (size_t i = 0; i < ca->tensors().size(); ++i) {
    ASSERT_EQ(ca->tensors()[i].offset, cb->tensors()[i].offset);
  }
  auto sa = internal::SampleTensorBytes(*ca, ca->tensors());
  auto sb = internal::SampleTensorBytes(*cb, cb->tensors());
  auto sc = internal::SampleTensorBytes(*cc, cc->tensors());
  ASSERT_TRUE(sa.ok() && sb.ok() && sc.ok()) << sa.status().ToString();
  const size_t sampled = std::min<size_t>(ca->tensors().size(), 64);
  EXPECT_EQ(sa->size(), sampled * 16);
  EXPECT_EQ(*sa, *sc);
  EXPECT_NE(*sa, *sb);
  // The bytes are the tensors' own: the first sampled tensor's middle.
  const TensorInfo& t0 = ca->tensors()[0];
  const std::vector<uint8_t> file = FileBytes(ca->files()[t0.file].path);
  const uint64_t at =
      t0.offset + (t0.size - std::min<uint64_t>(16, t0.size)) / 2;
  EXPECT_EQ(0, std::memcmp(sa->data(), file.data() + at,
                           std::min<uint64_t>(16, t0.size)));
  Checkpoint by_hand(ca->files(), ca->tensors());
  auto empty = internal::SampleTensorBytes(by_hand, by_hand.tensors());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// Files whose every read waits 2 ms (a remote store's round trip): the
// sample starts helpers once the first read proved slow, so reads overlap,
// and its bytes are the same as from plain local files.
class SlowEnv final : public internal::Env {
 public:
  StatusOr<std::unique_ptr<internal::File>> OpenForRead(
      const std::string& location, Backend backend,
      const internal::IoOptions& options) override {
    auto f = base_->OpenForRead(location, backend, options);
    if (!f.ok()) return f.status();
    internal::FileFaults faults;
    faults.before_read = [this](uint64_t) {
      const int now = ++reading_;
      int seen = most_.load();
      while (now > seen && !most_.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --reading_;
    };
    return std::unique_ptr<internal::File>(
        new internal::FaultInjectingFile(std::move(*f), faults));
  }
  StatusOr<internal::FileStat> Stat(const std::string& location) override {
    return base_->Stat(location);
  }
  StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& location) override {
    return base_->ListDirectory(location);
  }
  StatusOr<std::unique_ptr<internal::WritableFile>> OpenForWrite(
      const std::string& location) override {
    return base_->OpenForWrite(location);
  }
  int most_concurrent() const { return most_.load(); }

 private:
  internal::Env* base_ = internal::Env::Default();
  std::atomic<int> reading_{0}, most_{0};
};

TEST(TensorSample, SlowReadsOverlapAndGiveTheSameBytes) {
  SynthDir dir;
  SlowEnv env;
  auto slow = internal::OpenCheckpoint(env, dir.path);
  auto local = Checkpoint::Open(dir.path);
  ASSERT_TRUE(slow.ok() && local.ok()) << slow.status().ToString();
  const int before = env.most_concurrent();  // the headers' reads
  auto a = internal::SampleTensorBytes(*slow, slow->tensors());
  auto b = internal::SampleTensorBytes(*local, local->tensors());
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(before, 1);
  EXPECT_GT(env.most_concurrent(), 1) << "slow reads were not overlapped";
}

// Ranks that opened checkpoints of one layout but different weights fail
// together before any data moves, in both modes, naming both fingerprints.
TEST(LoadWithGroup, RanksWithOtherWeightsOfOneLayoutDisagree) {
  SynthDir a(7), b(8);
  auto ca = Checkpoint::Open(a.path);
  auto cb = Checkpoint::Open(b.path);
  ASSERT_TRUE(ca.ok() && cb.ok());
  for (bool tensor_parallel : {false, true}) {
    SCOPED_TRACE(tensor_parallel ? "tensor parallel" : "full");
    auto results = RunGroupLoad({&*ca, &*cb}, [&](int r) {
      GroupLoadRequest req;
      req.tensor_parallel = tensor_parallel;
      req.tp.rank = r;
      req.tp.size = 2;
      return req;
    });
    for (const RankResult& rr : results) {
      ASSERT_FALSE(rr.status.ok());
      EXPECT_EQ(rr.status.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(rr.status.message().find("ranks disagree"), std::string::npos)
          << rr.status.ToString();
      EXPECT_NE(rr.status.message().find("a sample of the tensors' bytes"),
                std::string::npos)
          << rr.status.ToString();
    }
  }
  // The same weights in two copies agree and load.
  SynthDir a2(7);
  auto ca2 = Checkpoint::Open(a2.path);
  ASSERT_TRUE(ca2.ok());
  auto same = RunGroupLoad({&*ca, &*ca2}, [](int r) {
    GroupLoadRequest req;
    req.tp.rank = r;
    req.tp.size = 2;
    return req;
  });
  for (const RankResult& rr : same) {
    EXPECT_TRUE(rr.status.ok()) << rr.status.ToString();
  }
}

// A subset by name, tensors handed out batch by batch (small batches),
// and a read that fails on one rank failing every rank with its reason.
TEST(LoadWithGroup, NamedTensorsComeAsTheirBatchesComplete) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  std::vector<std::string> names;
  for (size_t i = 0; i < ckpt->tensors().size(); i += 2) {
    names.push_back(ckpt->tensors()[i].name);
  }
  std::reverse(names.begin(), names.end());  // any order: checkpoint order
  const int n = 2;
  ThreadGroup group(n, milliseconds(30000));
  std::vector<Status> status(n);
  std::vector<std::vector<size_t>> order(n);
  std::vector<std::vector<LoadedTensor>> early(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      LoadOptions o;
      o.threads = 1;
      o.backend = Backend::kPread;
      auto loader = Loader::Create(o);
      ASSERT_TRUE(loader.ok());
      GroupLoadRequest req;
      req.names = names;
      req.batch_bytes = 4096;
      req.allgather_min_bytes = 1024;
      req.on_tensor = [&, r](size_t i, const LoadedTensor& t) {
        early[r].push_back(t);
        order[r].push_back(i);
      };
      LoadCallbacks cb;
      size_t ready = 0;
      cb.on_ready = [&](size_t i, const TensorInfo&) {
        EXPECT_EQ(order[r].back(), i);  // on_tensor came first
        ++ready;
      };
      auto got = LoadWithGroup(**loader, *ckpt, group.rank(r), req, cb);
      status[r] = got.ok() ? Status::OK() : got.status();
      if (got.ok()) {
        EXPECT_EQ(ready, names.size());
        EXPECT_EQ(got->tensors.size(), names.size());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r].ToString();
    ASSERT_EQ(early[r].size(), names.size());
    for (const LoadedTensor& lt : early[r]) {
      const TensorInfo* t = ckpt->Find(lt.name);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(lt.size, t->size);
      EXPECT_EQ(
          std::memcmp(lt.data, files[t->file].data() + t->offset, t->size), 0)
          << "rank " << r << " " << lt.name;
    }
  }
  // Several batches: the tensors were handed out in more than one go, in
  // checkpoint order.
  EXPECT_TRUE(std::is_sorted(order[0].begin(), order[0].end()));

  // A name that is not there: that rank cannot start; both fail with it.
  auto missing = RunGroupLoad(*ckpt, 2, [&](int r) {
    GroupLoadRequest req;
    req.names = {r == 0 ? names[0] : std::string("no.such.tensor")};
    return req;
  });
  EXPECT_NE(missing[0].status.message().find("rank 1 could not start the "
                                             "load"),
            std::string::npos)
      << missing[0].status.ToString();
  EXPECT_NE(missing[1].status.message().find("'no.such.tensor'"),
            std::string::npos)
      << missing[1].status.ToString();
}

// A rank's transport that fails its Kth collective call (Broadcast,
// AllGather or RunAll, 1-based) and passes every other to the real one.
class FailingTransport final : public GroupTransport {
 public:
  FailingTransport(GroupTransport& inner, int fail_at)
      : inner_(inner), fail_at_(fail_at) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status Broadcast(void* data, uint64_t bytes, int root) override {
    if (++calls_ == fail_at_) return Injected();
    return inner_.Broadcast(data, bytes, root);
  }
  Status AllGather(void* data, uint64_t part_bytes) override {
    if (++calls_ == fail_at_) return Injected();
    return inner_.AllGather(data, part_bytes);
  }
  Status RunAll(std::span<const GroupCollective> collectives,
                size_t* failed) override {
    if (++calls_ == fail_at_) return Injected();
    return inner_.RunAll(collectives, failed);
  }

 private:
  Status Injected() const {
    return Status::IoError("injected failure of collective call " +
                           std::to_string(fail_at_));
  }
  GroupTransport& inner_;
  const int fail_at_;
  int calls_ = 0;
};

// The reads run ahead of the collectives as one load; when a later batch's
// collective fails, the load still ends at once with that batch's error (its
// reads cancelled and joined), the other rank fails by its timeout instead
// of hanging, and the failed rank's loader is free and loads again.
TEST(LoadWithGroup, AFailedCollectiveMidLoadEndsTheReadsAndNamesIt) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  GroupRun run;
  run.timeout = milliseconds(1500);
  // Rank 0's calls: the agreement, then per batch an exchange and the
  // batch's collectives; call 4 is batch 1's exchange.
  run.wrap = [](GroupTransport& rank, int r) {
    return std::make_unique<FailingTransport>(rank, r == 0 ? 4 : 0);
  };
  auto results = RunGroupLoad(
      {&*ckpt, &*ckpt},
      [](int) {
        GroupLoadRequest req;
        req.batch_bytes = 4096;  // many batches
        req.allgather_min_bytes = 1024;
        return req;
      },
      run);
  const std::vector<Status> status = {results[0].status, results[1].status};
  EXPECT_EQ(status[0].code(), StatusCode::kIoError) << status[0].ToString();
  EXPECT_NE(status[0].message().find("injected failure of collective call 4"),
            std::string::npos)
      << status[0].ToString();
  EXPECT_NE(status[0].message().find("read its bytes of batch 1"),
            std::string::npos)
      << status[0].ToString();
  EXPECT_FALSE(status[1].ok());
  ASSERT_NE(results[0].loader, nullptr);
  auto again = results[0].loader->Load(*ckpt);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const std::vector<std::vector<uint8_t>> files = FilesOf(*ckpt);
  for (const LoadedTensor& lt : again->tensors) {
    const TensorInfo* t = ckpt->Find(lt.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::memcmp(lt.data, files[t->file].data() + t->offset, t->size),
              0)
        << lt.name;
  }
}

// A rank whose caller cancels its group load stops reading and fails with
// Cancelled; the other rank learns it at that batch's status exchange.
TEST(LoadWithGroup, ACancelledRankStopsEveryRank) {
  SynthDir dir;
  auto ckpt = Checkpoint::Open(dir.path);
  ASSERT_TRUE(ckpt.ok());
  std::atomic<bool> cancel{true};  // before it starts: deterministic
  GroupRun run;
  run.callbacks = [&](int r) {
    LoadCallbacks cb;
    if (r == 1) cb.cancel = &cancel;
    return cb;
  };
  auto results = RunGroupLoad(
      {&*ckpt, &*ckpt},
      [](int) {
        GroupLoadRequest req;
        req.batch_bytes = 4096;
        return req;
      },
      run);
  EXPECT_EQ(results[1].status.code(), StatusCode::kCancelled)
      << results[1].status.ToString();
  EXPECT_NE(results[0].status.message().find(
                "rank 1 could not read its bytes of batch 0: Cancelled"),
            std::string::npos)
      << results[0].status.ToString();
}

// A rank whose file shrank after it was opened cannot read its bytes: it
// fails with an IoError naming the file, and the other rank learns it at
// the first batch's exchange, with the reason, instead of waiting.
TEST(LoadWithGroup, AReadThatFailsOnOneRankFailsEveryRankWithItsReason) {
  SynthDir a, b;
  auto ca = Checkpoint::Open(a.path);
  auto cb = Checkpoint::Open(b.path);
  ASSERT_TRUE(ca.ok() && cb.ok());
  const std::string shrunk = cb->files().back().path;
  std::filesystem::resize_file(shrunk, cb->files().back().size - 100);
  auto results = RunGroupLoad({&*ca, &*cb}, [](int r) {
    GroupLoadRequest req;
    req.tensor_parallel = true;
    req.tp.rank = r;
    req.tp.size = 2;
    req.tp.plan = SplitBothWaysPlan();
    return req;
  });
  EXPECT_EQ(results[1].status.code(), StatusCode::kIoError)
      << results[1].status.ToString();
  EXPECT_NE(results[1].status.message().find(shrunk), std::string::npos)
      << results[1].status.ToString();
  EXPECT_NE(results[0].status.message().find(
                "rank 1 could not read its bytes of batch 0"),
            std::string::npos)
      << results[0].status.ToString();
  EXPECT_NE(results[0].status.message().find(shrunk), std::string::npos)
      << results[0].status.ToString();
}

// The public NCCL entry points: an id survives its hex form (how ranks pass
// it on), bad text and bad ranks are clear errors before any CUDA or NCCL
// call, and without libnccl (this machine) making an id says so.
TEST(NcclPublic, IdsTravelAsHexAndBadInputIsRefused) {
  NcclId id;
  for (size_t i = 0; i < id.bytes.size(); ++i) {
    id.bytes[i] = static_cast<std::byte>((i * 37 + 5) & 0xff);
  }
  const std::string hex = NcclIdToHex(id);
  ASSERT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 6), "052a4f");
  auto back = NcclIdFromHex(hex);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->bytes, id.bytes);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  ASSERT_TRUE(NcclIdFromHex(upper).ok());
  EXPECT_EQ(NcclIdFromHex(upper)->bytes, id.bytes);

  auto short_id = NcclIdFromHex(hex.substr(1));
  EXPECT_EQ(short_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_id.status().message().find("want 256 hex digits, got 255"),
            std::string::npos)
      << short_id.status().ToString();
  std::string bad = hex;
  bad[41] = 'g';
  EXPECT_NE(NcclIdFromHex(bad).status().message().find("character 41"),
            std::string::npos);

  for (auto [rank, size] : {std::pair{2, 2}, {-1, 2}, {0, 0}}) {
    auto g = JoinNcclGroup(id, rank, size, 0, milliseconds(1000));
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find("rank " + std::to_string(rank) +
                                        " of " + std::to_string(size)),
              std::string::npos)
        << g.status().ToString();
  }
  for (auto t : {milliseconds(0), milliseconds::max()}) {
    EXPECT_NE(JoinNcclGroup(id, 0, 1, 0, t)
                  .status()
                  .message()
                  .find("want 1 ms to 7 days"),
              std::string::npos);
  }
  auto made = MakeNcclId();
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  const bool can_make = NcclLib::Get().ok();
#else
  const bool can_make = false;  // a build without CUDA (the sanitizers')
#endif
  if (!can_make) {
    EXPECT_EQ(made.status().code(), StatusCode::kUnsupported);
    auto g = JoinNcclGroup(id, 0, 1, 0, milliseconds(1000));
    EXPECT_EQ(g.status().code(), StatusCode::kUnsupported)
        << g.status().ToString();
  } else {
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    EXPECT_NE(made->bytes, NcclId{}.bytes);  // NCCL filled it in
  }
}

TEST(NcclConfig, IsTheNccl214PrefixOfNcclConfigT) {
  // ncclConfig_t of NCCL 2.14: size_t size; unsigned magic, version;
  // int blocking. NCCL reads `size` bytes and defaults the rest.
  NcclConfig c;
  EXPECT_EQ(offsetof(NcclConfig, size), 0u);
  EXPECT_EQ(offsetof(NcclConfig, magic), sizeof(size_t));
  EXPECT_EQ(offsetof(NcclConfig, version), sizeof(size_t) + 4);
  EXPECT_EQ(offsetof(NcclConfig, blocking), sizeof(size_t) + 8);
  EXPECT_EQ(c.size, sizeof(NcclConfig));
  EXPECT_EQ(c.magic, 0xcafebeefu);
  EXPECT_EQ(c.version, 21400u);
  EXPECT_EQ(c.blocking, 0);  // non-blocking: init and calls can time out
}

}  // namespace
}  // namespace weightlift::internal
