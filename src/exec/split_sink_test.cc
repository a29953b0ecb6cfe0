// SplitSink with the plans it serves, on a real in-memory file: a tensor-
// parallel rank's parts (row slices, column slices, whole tensors), some
// "registered" (their bytes already in memory the sink copies from) and
// the rest read into slots, placed as the CUDA loader places them
// (covering_is_free in place), planned apart and merged (MergeInPlace),
// then run by the executor in one run. Every selected byte lands once,
// each tensor is ready once and only when complete, each chunk goes to
// the sink it belongs to, and both sinks are drained.
#include "exec/split_sink.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "env/memory_file.h"
#include "exec/completion.h"
#include "exec/executor.h"
#include "exec/thread_pool.h"
#include "plan/plan.h"
#include "plan/selection.h"
#include "plan/testing/tensors.h"

namespace weightlift::internal {
namespace {

// Copies one scatter (one run, or ROWS runs SRC_PITCH apart) from SRC.
void CopyScatter(const Scatter& sc, const std::byte* src) {
  const uint64_t pitch = sc.rows > 1 ? sc.src_pitch : sc.length;
  for (uint64_t r = 0; r < sc.rows; ++r) {
    std::memcpy(reinterpret_cast<std::byte*>(sc.dst) + r * sc.length,
                src + sc.chunk_offset + r * pitch, sc.length);
  }
}

// What both test sinks share: two slots per worker whose chunks are
// reported delivered late (when the slot comes round again, or at Drain),
// as the CUDA sinks report them once their copies completed; and which
// chunks each saw.
class TwoSlotSink : public Sink {
 public:
  explicit TwoSlotSink(int workers) : workers_(workers) {}
  Status BeginWorker(int w) override {
    workers_[w].next = 0;
    return Status::OK();
  }
  Status Deliver(int w, const ReadChunk& c, SinkSlot slot,
                 CompletionTracker&) override {
    for (const Scatter& sc : c.scatters) CopyScatter(sc, slot.data);
    workers_[w].held[slot.index] = &c;
    std::lock_guard<std::mutex> l(mu_);
    ++delivered_;
    in_place_seen_ += c.in_place;
    return Status::OK();
  }
  void Abandon(int w, SinkSlot slot) override {
    workers_[w].held[slot.index] = nullptr;
  }
  void Drain(int w, CompletionTracker& done) override {
    for (const ReadChunk*& h : workers_[w].held) {
      if (h != nullptr) done.Delivered(*std::exchange(h, nullptr));
    }
  }
  int delivered() const { return delivered_; }
  int in_place_seen() const { return in_place_seen_; }

 protected:
  // The next slot of worker W, reporting the chunk it held.
  int NextSlot(int w, CompletionTracker& done) {
    Worker& wk = workers_[w];
    const int i = wk.next;
    wk.next ^= 1;
    if (wk.held[i] != nullptr) done.Delivered(*std::exchange(wk.held[i], {}));
    return i;
  }

 private:
  struct Worker {
    const ReadChunk* held[2] = {nullptr, nullptr};
    int next = 0;
  };
  std::vector<Worker> workers_;
  std::mutex mu_;
  int delivered_ = 0, in_place_seen_ = 0;
};

// Slots the executor reads chunks into.
class ReadSlotSink final : public TwoSlotSink {
 public:
  ReadSlotSink(int workers, uint64_t slot_bytes)
      : TwoSlotSink(workers), slot_bytes_(slot_bytes), bufs_(2 * workers) {
    for (auto& b : bufs_) b.resize(slot_bytes);
  }
  uint64_t slot_bytes() const override { return slot_bytes_; }
  StatusOr<SinkSlot> AcquireSlot(int w, const ReadChunk&,
                                 CompletionTracker& done) override {
    const int i = NextSlot(w, done);
    return SinkSlot{bufs_[2 * w + i].data(), i, false};
  }

 private:
  uint64_t slot_bytes_;
  std::vector<std::vector<std::byte>> bufs_;
};

// The file's bytes already in memory (as pages registered ahead are): the
// slot is the memory itself, filled, and nothing is read.
class InMemorySink final : public TwoSlotSink {
 public:
  InMemorySink(int workers, const std::vector<std::byte>& bytes)
      : TwoSlotSink(workers), bytes_(bytes) {}
  uint64_t slot_bytes() const override { return UINT64_MAX; }
  StatusOr<SinkSlot> AcquireSlot(int w, const ReadChunk& c,
                                 CompletionTracker& done) override {
    if (c.offset + c.length > bytes_.size()) {
      return Status::Internal("chunk past the memory");
    }
    const int i = NextSlot(w, done);
    return SinkSlot{const_cast<std::byte*>(bytes_.data()) + c.offset, i, true};
  }

 private:
  const std::vector<std::byte>& bytes_;
};

// SEL's selected bytes of FILE, back to back.
std::vector<std::byte> Expected(const TensorSelection& sel,
                                const std::vector<std::byte>& file) {
  std::vector<std::byte> out;
  for (const RowBlock& b : sel.blocks) {
    for (uint64_t r = 0; r < b.rows; ++r) {
      const std::byte* p = file.data() + b.file_offset + r * b.pitch;
      out.insert(out.end(), p, p + b.width);
    }
  }
  return out;
}

TEST(SplitSinkTest, InPlaceAndReadChunksRunTogetherAndLandOnce) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 40; ++round) {
    // Tensors back to back (some gaps), 2-byte elements.
    std::vector<TensorInfo> tensors;
    uint64_t offset = rng() % 300;
    for (int t = 0; t < 10; ++t) {
      tensors.push_back(
          testing::Tensor({1 + rng() % 64, 1 + rng() % 900}, 2, offset));
      offset += tensors.back().size + (rng() % 2) * (rng() % 5000);
    }
    std::vector<std::byte> bytes(offset + 64);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    MemoryFile file("ranks.safetensors", bytes);

    std::vector<TensorSelection> sels;
    std::vector<bool> in_place;
    for (uint32_t k = 0; k < tensors.size(); ++k) {
      const TensorInfo& t = tensors[k];
      std::vector<DimSlice> slice = {{0, t.shape[0], 1}, {0, t.shape[1], 1}};
      if (rng() % 4 != 0) {  // a rank's part of dim 0 or 1; else whole
        const uint64_t d = rng() % 2;
        const uint64_t a = rng() % t.shape[d];
        slice[d] = {a, a + 1 + rng() % (t.shape[d] - a), 1};
      }
      auto sel = SelectSlice(t, k, 16, slice);
      ASSERT_TRUE(sel.ok()) << sel.status().ToString();
      sels.push_back(std::move(*sel));
      in_place.push_back(rng() % 2 == 0);
    }

    // Placed and planned as CoreLoader::Run does for a route with in-place
    // selections: page granularity and free covering for those.
    const uint64_t slot = (16 + rng() % 48) << 10;
    const uint64_t copy = (64 + rng() % 512) << 10;
    std::vector<std::vector<std::byte>> dst(sels.size());
    std::vector<Segment> read, mapped;
    ReadCounts counts;
    for (uint32_t k = 0; k < sels.size(); ++k) {
      dst[k].resize(sels[k].bytes);
      PlaceOptions po;
      po.granularity = in_place[k] ? 4096 : 1;
      po.covering_is_free = in_place[k];
      po.max_chunk_bytes = in_place[k] ? copy : slot;
      PlaceSelection(sels[k], reinterpret_cast<uintptr_t>(dst[k].data()), k, po,
                     in_place[k] ? &mapped : &read, &counts);
    }
    PlanFile pf{bytes.size(), 1, false}, mf{bytes.size(), 4096, false};
    Plan plan =
        MakePlan(read, {&pf, 1}, sels.size(), PlanOptions{slot, UINT64_MAX});
    const size_t read_chunks = plan.chunks.size();
    Plan in_memory =
        MakePlan(mapped, {&mf, 1}, sels.size(), PlanOptions{copy, UINT64_MAX});
    const size_t in_place_chunks = in_memory.chunks.size();
    MergeInPlace(std::move(in_memory), &plan);
    ASSERT_EQ(plan.chunks.size(), read_chunks + in_place_chunks);

    std::mutex mu;
    std::map<uint32_t, int> ready;
    int early = 0;
    CompletionTracker done(
        sels.size(),
        [&](uint32_t k) {
          const bool ok = dst[k] == Expected(sels[k], bytes);
          std::lock_guard<std::mutex> g(mu);
          ++ready[k];
          early += !ok;
        },
        nullptr, plan.bytes_delivered);
    done.AddPieces(plan);
    done.Start();

    ThreadPool pool(4);
    ReadSlotSink slots(pool.size(), slot);
    InMemorySink memory(pool.size(), bytes);
    SplitSink split(memory, slots);
    ASSERT_EQ(split.slot_bytes(), slot);
    File* files[] = {&file};
    ExecStats stats;
    RunPlan(plan, files, split, pool, RunOptions{}, done, &stats);
    ASSERT_TRUE(done.first_error().ok()) << done.first_error().ToString();
    done.Finish();

    EXPECT_EQ(memory.delivered(), static_cast<int>(in_place_chunks));
    EXPECT_EQ(memory.in_place_seen(), static_cast<int>(in_place_chunks));
    EXPECT_EQ(slots.delivered(), static_cast<int>(read_chunks));
    EXPECT_EQ(slots.in_place_seen(), 0);
    EXPECT_EQ(ready.size(), sels.size()) << "round " << round;
    for (auto& [k, n] : ready) EXPECT_EQ(n, 1) << "tensor " << k;
    EXPECT_EQ(early, 0) << "on_ready before the tensor's bytes were in place";
    for (uint32_t k = 0; k < sels.size(); ++k) {
      EXPECT_TRUE(dst[k] == Expected(sels[k], bytes))
          << "round " << round << " tensor " << k
          << (in_place[k] ? " (in place)" : " (read)");
    }
    EXPECT_EQ(done.delivered(), plan.bytes_delivered);
  }
}

// An in-place chunk handed a slot to read into is an error that names the
// chunk, not a read into memory nobody owns.
TEST(SplitSinkTest, AnInPlaceChunkThatGetsASlotToReadIsAnError) {
  ReadSlotSink a(1, 4096), b(1, 4096);
  SplitSink split(a, b);  // both hand out slots to read into
  CompletionTracker done(1, nullptr, nullptr, 0);
  ReadChunk c;
  c.file = 2;
  c.offset = 8192;
  c.length = 100;
  c.in_place = true;
  ASSERT_TRUE(split.BeginWorker(0).ok());
  auto slot = split.AcquireSlot(0, c, done);
  ASSERT_FALSE(slot.ok());
  EXPECT_EQ(slot.status().code(), StatusCode::kInternal);
  EXPECT_NE(slot.status().message().find("offset 8192 of file 2"),
            std::string::npos)
      << slot.status().message();
  c.in_place = false;
  auto read = split.AcquireSlot(0, c, done);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->in_place);
  EXPECT_FALSE(read->filled);
}

}  // namespace
}  // namespace weightlift::internal
