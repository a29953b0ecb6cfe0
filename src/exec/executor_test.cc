// The executor's contract with its sinks, on real in-memory files: every
// chunk in place, on_ready once per tensor and only once its bytes are in
// place (also when a sink reports chunks late, as the CUDA sinks do, and
// when a tensor's pieces come from two routes), every worker drained, the
// first error kept with the tensor and file it hit.
#include "exec/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "env/fault_file.h"
#include "env/forwarding_file.h"
#include "env/memory_file.h"
#include "exec/bounce_pool.h"
#include "exec/completion.h"
#include "exec/host_sink.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"

namespace weightlift::internal {
namespace {

std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// A host sink that completes chunks late, like StagingSink: Deliver copies
// into place but reports the chunk only when its slot is taken again or at
// Drain. Each worker has two slots of its own.
class LateSink final : public Sink {
 public:
  LateSink(int workers, uint64_t slot_bytes)
      : slot_bytes_(slot_bytes), workers_(workers) {
    for (Worker& w : workers_) {
      for (Slot& s : w.slots) s.buf.resize(slot_bytes);
    }
  }
  uint64_t slot_bytes() const override { return slot_bytes_; }
  Status BeginWorker(int w) override {
    std::lock_guard<std::mutex> l(mu_);
    ++begun_;
    workers_[w].next = 0;
    return Status::OK();
  }
  StatusOr<SinkSlot> AcquireSlot(int w, const ReadChunk&,
                                 CompletionTracker& done) override {
    Worker& wk = workers_[w];
    const int i = wk.next;
    wk.next ^= 1;
    Slot& s = wk.slots[i];
    if (s.chunk != nullptr) done.Delivered(*std::exchange(s.chunk, nullptr));
    return SinkSlot{s.buf.data(), i, false};
  }
  Status Deliver(int w, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker&) override {
    if (fail_tensor_ >= 0 && !c.scatters.empty() &&
        c.scatters.front().tensor == static_cast<uint32_t>(fail_tensor_)) {
      return Status::Internal("copy engine refused the slot");
    }
    for (const Scatter& sc : c.scatters) {
      std::memcpy(reinterpret_cast<void*>(sc.dst), slot.data + sc.chunk_offset,
                  sc.length);
    }
    workers_[w].slots[slot.index].chunk = &c;
    return Status::OK();
  }
  void Abandon(int, SinkSlot) override {}
  void Drain(int w, CompletionTracker& done) override {
    std::lock_guard<std::mutex> l(mu_);
    ++drained_;
    for (Slot& s : workers_[w].slots) {
      if (s.chunk != nullptr) done.Delivered(*std::exchange(s.chunk, nullptr));
    }
  }
  bool idle() const {
    for (const Worker& w : workers_) {
      for (const Slot& s : w.slots) {
        if (s.chunk != nullptr) return false;
      }
    }
    return true;
  }
  int begun() const { return begun_; }
  int drained() const { return drained_; }
  void FailDeliveryOf(int tensor) { fail_tensor_ = tensor; }

 private:
  struct Slot {
    std::vector<std::byte> buf;
    const ReadChunk* chunk = nullptr;
  };
  struct Worker {
    Slot slots[2];
    int next = 0;
  };
  uint64_t slot_bytes_;
  std::vector<Worker> workers_;
  std::mutex mu_;
  int begun_ = 0, drained_ = 0;
  int fail_tensor_ = -1;
};

// Tensors of SIZES bytes back to back in one file, each to its own
// destination, as a bounce-only plan of CHUNK-byte reads.
struct Layout {
  std::vector<std::byte> file;
  std::vector<std::vector<std::byte>> dst;
  std::vector<Segment> segments;
};
Layout MakeLayout(const std::vector<uint64_t>& sizes, uint32_t seed) {
  Layout l;
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  l.file = RandomBytes(total, seed);
  uint64_t off = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    l.dst.emplace_back(sizes[t]);
    l.segments.push_back(Segment{0, off, sizes[t],
                                 reinterpret_cast<uintptr_t>(l.dst[t].data()),
                                 static_cast<uint32_t>(t)});
    off += sizes[t];
  }
  return l;
}

TEST(Executor, LateCompletionFiresOnReadyOnceAfterTheBytesAreInPlace) {
  Layout l = MakeLayout({1000, 70000, 3, 0, 250000, 4096, 99999}, 1);
  MemoryFile file("mem.safetensors", l.file);
  PlanFile pf{l.file.size(), 1, /*allow_direct=*/false};
  PlanOptions po;
  po.chunk_bytes = 16 << 10;  // many chunks, several per tensor
  Plan plan = MakePlan(l.segments, {&pf, 1}, l.dst.size(), po);
  ASSERT_GT(plan.chunks.size(), 20u);

  std::mutex mu;
  std::map<uint32_t, int> ready;
  int early = 0;
  uint64_t last_done = 0, last_total = 0;
  CompletionTracker done(
      l.dst.size(),
      [&](uint32_t t) {
        const size_t at = l.segments[t].file_offset;
        const bool ok =
            l.dst[t].empty() || std::memcmp(l.dst[t].data(), l.file.data() + at,
                                            l.dst[t].size()) == 0;
        std::lock_guard<std::mutex> g(mu);
        ++ready[t];
        if (!ok) ++early;
      },
      [&](uint64_t d, uint64_t total) {
        last_done = d;
        last_total = total;
      },
      plan.bytes_delivered);
  done.AddPieces(plan);
  done.Start();
  EXPECT_EQ(ready[3], 1) << "an empty tensor is ready before any read";

  ThreadPool pool(4);
  LateSink sink(pool.size(), 16 << 10);
  File* files[] = {&file};
  ExecStats stats;
  RunPlan(plan, files, sink, pool, RunOptions{}, done, &stats);
  ASSERT_TRUE(done.first_error().ok()) << done.first_error().ToString();
  done.Finish();
  EXPECT_EQ(ready.size(), l.dst.size());
  for (auto& [t, n] : ready) EXPECT_EQ(n, 1) << "tensor " << t;
  EXPECT_EQ(early, 0) << "on_ready before the tensor's bytes were in place";
  EXPECT_EQ(done.delivered(), plan.bytes_delivered);
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, plan.bytes_delivered);
  EXPECT_EQ(sink.begun(), stats.threads);
  EXPECT_EQ(sink.drained(), stats.threads);
  EXPECT_TRUE(sink.idle());
  EXPECT_EQ(stats.bounce_chunks, plan.chunks.size());
}

// LateSink whose slots come back slowly (as a copy engine behind the
// readers would), or a file whose reads are slow: the timeline says which
// one held the workers up.
class SlowSlotSink final : public Sink {
 public:
  SlowSlotSink(int workers, uint64_t slot_bytes)
      : inner_(workers, slot_bytes) {}
  uint64_t slot_bytes() const override { return inner_.slot_bytes(); }
  Status BeginWorker(int w) override { return inner_.BeginWorker(w); }
  StatusOr<SinkSlot> AcquireSlot(int w, const ReadChunk& c,
                                 CompletionTracker& done) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return inner_.AcquireSlot(w, c, done);
  }
  Status Deliver(int w, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker& done) override {
    return inner_.Deliver(w, c, slot, done);
  }
  void Abandon(int w, SinkSlot slot) override { inner_.Abandon(w, slot); }
  void Drain(int w, CompletionTracker& done) override { inner_.Drain(w, done); }

 private:
  LateSink inner_;
};

class SlowFile final : public ForwardingFile {
 public:
  using ForwardingFile::ForwardingFile;
  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return ForwardingFile::ReadAt(offset, dst);
  }
};

// Runs 16 chunks of LAYOUT through SINK from FILE with the timeline on.
ExecStats TimedRun(Layout& l, File& file, Sink& sink) {
  PlanFile pf{l.file.size(), 1, /*allow_direct=*/false};
  PlanOptions po;
  po.chunk_bytes = 16 << 10;
  Plan plan = MakePlan(l.segments, {&pf, 1}, l.dst.size(), po);
  EXPECT_EQ(plan.chunks.size(), 16u);
  CompletionTracker done(l.dst.size(), nullptr, nullptr, plan.bytes_delivered);
  done.AddPieces(plan);
  done.Start();
  ThreadPool pool(2);
  File* files[] = {&file};
  ExecStats stats;
  stats.start = Clock::now();
  RunPlan(plan, files, sink, pool, RunOptions{}, done, &stats);
  EXPECT_TRUE(done.first_error().ok()) << done.first_error().ToString();
  done.Finish();
  for (size_t t = 0; t < l.dst.size(); ++t) {
    EXPECT_EQ(0, std::memcmp(l.dst[t].data(),
                             l.file.data() + l.segments[t].file_offset,
                             l.dst[t].size()));
  }
  return stats;
}

TEST(Executor, TheTimelineSaysWhetherTheReadsOrTheSinkHeldTheWorkersUp) {
  Layout l = MakeLayout({16 * 16 << 10}, 9);
  {
    MemoryFile file("mem.safetensors", l.file);
    SlowSlotSink sink(2, 16 << 10);
    const ExecStats st = TimedRun(l, file, sink);
    // 16 slots at 2 ms each, over two workers.
    EXPECT_GE(st.slot_wait_seconds, 0.030);
    EXPECT_LT(st.read_seconds, st.slot_wait_seconds / 2);
    EXPECT_GE(st.first_delivery, 0.0);
    EXPECT_GE(st.last_read_end, st.first_delivery);
    EXPECT_GE(st.drained, st.last_read_end);
    const std::string note = TimelineNote(st);
    EXPECT_NE(note.find("executor: 2 workers' time: reading "),
              std::string::npos)
        << note;
    EXPECT_NE(note.find("waiting for a free slot"), std::string::npos);
    EXPECT_NE(note.find("all drained at"), std::string::npos);
  }
  {
    SlowFile file(std::make_unique<MemoryFile>("mem.safetensors", l.file));
    LateSink sink(2, 16 << 10);
    const ExecStats st = TimedRun(l, file, sink);
    EXPECT_GE(st.read_seconds, 0.030);
    EXPECT_LT(st.slot_wait_seconds, st.read_seconds / 2);
  }
  // Without a start time, no timeline (and no note).
  ExecStats none;
  EXPECT_EQ(TimelineNote(none), "");
}

// One tensor half from each of two files, each file its own route (plan
// and sink), one tracker: ready only after the second route ran.
TEST(Executor, TensorSplitOverTwoRoutesIsReadyOnlyWhenBothDelivered) {
  std::vector<std::byte> a = RandomBytes(300000, 2), b = RandomBytes(200000, 3);
  MemoryFile fa("a.safetensors", a), fb("b.safetensors", b);
  std::vector<std::byte> dst(a.size() + b.size());
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst.data());
  Segment sa{0, 0, a.size(), d, 0};
  Segment sb{1, 0, b.size(), d + a.size(), 0};
  PlanFile pfs[] = {{a.size(), 1, true}, {b.size(), 1, true}};
  PlanOptions po;
  po.chunk_bytes = 64 << 10;
  po.direct_min_bytes = 0;  // host route: straight into place
  Plan pa = MakePlan({&sa, 1}, pfs, 1, po);
  Plan pb = MakePlan({&sb, 1}, pfs, 1, po);
  int ready = 0;
  CompletionTracker done(
      1, [&](uint32_t) { ++ready; }, nullptr,
      pa.bytes_delivered + pb.bytes_delivered);
  done.AddPieces(pa);
  done.AddPieces(pb);
  done.Start();
  ThreadPool pool(3);
  auto bounce = BouncePool::Create(1 << 20, 64 << 10);
  ASSERT_TRUE(bounce.ok()) << bounce.status().ToString();
  HostSink host(**bounce);
  LateSink late(pool.size(), 64 << 10);
  File* files_a[] = {&fa, nullptr};
  File* files_b[] = {nullptr, &fb};
  ExecStats stats;
  RunPlan(pa, files_a, host, pool, RunOptions{}, done, &stats);
  EXPECT_EQ(ready, 0) << "half the tensor is not the tensor";
  // The second half through a late-completing sink, as bounce chunks.
  PlanFile bounce_only[] = {{a.size(), 1, false}, {b.size(), 1, false}};
  Plan pb2 = MakePlan({&sb, 1}, bounce_only, 1, po);
  ASSERT_EQ(pb2.pieces_per_tensor, pb.pieces_per_tensor);
  RunPlan(pb2, files_b, late, pool, RunOptions{}, done, &stats);
  ASSERT_TRUE(done.first_error().ok()) << done.first_error().ToString();
  EXPECT_EQ(ready, 1);
  EXPECT_EQ(std::memcmp(dst.data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(dst.data() + a.size(), b.data(), b.size()), 0);
  EXPECT_GT(stats.direct_chunks, 0u);
  EXPECT_GT(stats.bounce_chunks, 0u);
}

// A read error and a sink error: the first is kept, names the tensor (and
// for the sink's own error the file), every worker drains, nothing is
// reported ready after the failure, and no slot stays in use.
TEST(Executor, FirstErrorNamesTheTensorAndEveryWorkerDrains) {
  Layout l = MakeLayout({200000, 200000, 200000, 200000}, 4);
  const char* names[] = {"w0", "w1", "w2", "w3"};
  PlanFile pf{l.file.size(), 1, false};
  PlanOptions po;
  po.chunk_bytes = 32 << 10;
  Plan plan = MakePlan(l.segments, {&pf, 1}, l.dst.size(), po);
  RunOptions run;
  run.tensor_name = [&](uint32_t t) { return std::string(names[t]); };
  ThreadPool pool(4);

  for (bool sink_error : {false, true}) {
    SCOPED_TRACE(sink_error ? "sink error" : "read error");
    auto inner = std::make_unique<MemoryFile>("faulty.safetensors", l.file, 1);
    FileFaults faults;
    if (!sink_error)
      faults.eio_offset = 2 * 200000 + 50000;  // in a chunk of w2 only
    FaultInjectingFile file(std::move(inner), faults);
    LateSink sink(pool.size(), 32 << 10);
    if (sink_error) sink.FailDeliveryOf(1);
    std::atomic<int> ready_after_failure{0};
    CompletionTracker* tracker = nullptr;
    CompletionTracker done(
        l.dst.size(),
        [&](uint32_t) {
          if (tracker->failed()) ready_after_failure.fetch_add(1);
        },
        nullptr, plan.bytes_delivered);
    tracker = &done;
    done.AddPieces(plan);
    done.Start();
    File* files[] = {&file};
    ExecStats stats;
    RunPlan(plan, files, sink, pool, run, done, &stats);
    Status s = done.first_error();
    ASSERT_FALSE(s.ok());
    if (sink_error) {
      EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
      EXPECT_NE(s.message().find("'w1'"), std::string::npos) << s.ToString();
      EXPECT_NE(s.message().find("faulty.safetensors"), std::string::npos)
          << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
      EXPECT_NE(s.message().find("'w2'"), std::string::npos) << s.ToString();
    }
    EXPECT_EQ(ready_after_failure.load(), 0);
    EXPECT_EQ(sink.begun(), stats.threads);
    EXPECT_EQ(sink.drained(), stats.threads);
    EXPECT_TRUE(sink.idle());
    EXPECT_LT(done.delivered(), plan.bytes_delivered);
  }
}

// A plan whose bounce chunks do not fit the sink's slots is refused before
// any read.
TEST(Executor, PlanLargerThanTheSlotsIsAnInternalError) {
  Layout l = MakeLayout({100000}, 5);
  MemoryFile file("m", l.file);
  PlanFile pf{l.file.size(), 1, false};
  PlanOptions po;
  po.chunk_bytes = 64 << 10;
  Plan plan = MakePlan(l.segments, {&pf, 1}, 1, po);
  CompletionTracker done(1, nullptr, nullptr, plan.bytes_delivered);
  done.AddPieces(plan);
  done.Start();
  ThreadPool pool(2);
  LateSink sink(pool.size(), 4096);
  File* files[] = {&file};
  RunPlan(plan, files, sink, pool, RunOptions{}, done, nullptr);
  EXPECT_EQ(done.first_error().code(), StatusCode::kInternal);
  EXPECT_EQ(sink.begun(), 0) << "no worker starts on a plan that cannot fit";
}

}  // namespace
}  // namespace weightlift::internal

namespace weightlift::internal {
namespace {

// ThreadPool's ON_START runs once on each worker's own thread, before that
// worker takes any job: a job given right after creation waits for it, and
// the worker that runs job index i is the thread that ran on_start(i).
TEST(ThreadPoolTest, OnStartRunsFirstOnEachWorkersOwnThread) {
  constexpr int kThreads = 4;
  std::mutex mu;
  std::map<int, std::thread::id> started;
  std::vector<std::atomic<bool>> done(kThreads);
  ThreadPool pool(kThreads, [&](int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      std::lock_guard<std::mutex> lock(mu);
      started[i] = std::this_thread::get_id();
    }
    done[i] = true;
  });
  ASSERT_TRUE(pool.status().ok());
  std::map<int, std::thread::id> ran;
  std::vector<bool> after_start(kThreads, false);
  ASSERT_TRUE(pool.Run([&](int i) {
                    const bool started_first = done[i].load();
                    std::lock_guard<std::mutex> lock(mu);
                    ran[i] = std::this_thread::get_id();
                    after_start[i] = started_first;
                  })
                  .ok());
  ASSERT_EQ(ran.size(), static_cast<size_t>(kThreads));
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(after_start[i]) << i;
    EXPECT_EQ(ran[i], started.at(i)) << i;
  }
  int calls = 0;
  ASSERT_TRUE(pool.Run([&](int) {
                    std::lock_guard<std::mutex> lock(mu);
                    ++calls;
                  })
                  .ok());
  EXPECT_EQ(calls, kThreads);
  EXPECT_EQ(started.size(), static_cast<size_t>(kThreads));  // not again
}

// A pool destroyed while its workers are still in ON_START waits for them.
TEST(ThreadPoolTest, DestroyedDuringOnStartWaitsForIt) {
  std::atomic<int> finished{0};
  {
    ThreadPool pool(3, [&](int) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      finished.fetch_add(1);
    });
  }
  EXPECT_EQ(finished.load(), 3);
}

}  // namespace
}  // namespace weightlift::internal
