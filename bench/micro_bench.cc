// Microbenchmarks (Google Benchmark) of the CPU work every load does before
// and around its reads: parsing a header and an index, and planning the
// reads. They bound the fixed cost per load and per file; the byte-moving
// part is measured by `weightlift bench`, not here.
//
//   build/bench/micro_bench [--benchmark_filter=...]
//
// Inputs are made in memory at the sizes of real checkpoints: 291 tensors
// (a Llama-2-7B shard set), 2,000 (a large MoE shard) and 100,000 (the
// parser's stress size).
#include <benchmark/benchmark.h>
#include <stdlib.h>  // mkdtemp

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "format/header.h"
#include "format/index.h"
#include "format/writer.h"
#include "plan/plan.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {
namespace {

// Set when any benchmark could not run its work (main then exits 1, so the
// ctest that runs every benchmark once can fail).
bool g_failed = false;

void Fail(benchmark::State& state, const std::string& why) {
  g_failed = true;
  state.SkipWithError(why.c_str());
}

std::span<const std::byte> AsBytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// N bf16 tensors with transformer-like names and shapes (no data: only the
// header is built).
std::vector<TensorToWrite> Tensors(int n) {
  std::vector<TensorToWrite> t;
  t.reserve(n);
  for (int i = 0; i < n; ++i) {
    TensorToWrite w;
    w.name = "model.layers." + std::to_string(i / 9) + ".mlp.proj_" +
             std::to_string(i % 9) + ".weight";
    w.dtype = DType::kBF16;
    w.shape = {uint64_t(64 + i % 7), uint64_t(128 + i % 5)};
    t.push_back(std::move(w));
  }
  return t;
}

struct HeaderInput {
  std::string json;
  uint64_t file_size = 0;
};

HeaderInput MakeHeader(int n) {
  HeaderInput h;
  StatusOr<std::string> json = BuildHeaderJson(Tensors(n), WriteOptions{});
  if (!json.ok()) return h;
  h.json = std::move(*json);
  uint64_t data = 0;
  for (const TensorToWrite& t : Tensors(n)) {
    data += t.shape[0] * t.shape[1] * 2;
  }
  h.file_size = 8 + h.json.size() + data;
  return h;
}

void BM_ParseHeader(benchmark::State& state) {
  const HeaderInput h = MakeHeader(static_cast<int>(state.range(0)));
  if (h.json.empty()) {
    Fail(state, "could not build the header");
    return;
  }
  for (auto _ : state) {
    StatusOr<ParsedHeader> p =
        ParseHeader(AsBytes(h.json), h.json.size(), h.file_size, "bench");
    if (!p.ok()) {
      Fail(state, p.status().ToString());
      return;
    }
    benchmark::DoNotOptimize(p->tensors.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(h.json.size()));
  state.SetItemsProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ParseHeader)->Arg(291)->Arg(2000)->Arg(100000);

void BM_ParseIndex(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::string json = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
  for (const TensorToWrite& t : Tensors(n)) {
    if (json.back() != '{') json += ", ";
    json += "\"" + t.name + "\": \"" +
            ShardFileName(1 + static_cast<int>(json.size() % 4), 4) + "\"";
  }
  json += "}}";
  for (auto _ : state) {
    StatusOr<ParsedIndex> p = ParseIndex(AsBytes(json), "bench-index");
    if (!p.ok()) {
      Fail(state, p.status().ToString());
      return;
    }
    benchmark::DoNotOptimize(p->weight_map.size());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(json.size()));
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_ParseIndex)->Arg(291)->Arg(2000)->Arg(100000);

// Checkpoint::Open of a sharded folder (SHARDS files of PER tensors each,
// 16 bytes apiece, and their index), written once to a temporary folder:
// every header read and parsed, the index cross-checked, the name lookup
// built. 2 x 146 is a Llama-2-7B's layout by count; 160 x 400 (64,000
// tensors) is the scale of the largest MoE checkpoints (DeepSeek-V3: about
// 91,000 tensors in 163 shards). Every load by path and every safe_open
// pays this.
void BM_OpenShardedCheckpoint(benchmark::State& state) {
  const int shards = static_cast<int>(state.range(0));
  const int per = static_cast<int>(state.range(1));
  std::string dir = std::filesystem::temp_directory_path() / "wl_open_XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    Fail(state, "mkdtemp failed");
    return;
  }
  static const std::byte kData[16] = {};
  std::vector<std::vector<TensorToWrite>> files(shards);
  for (int f = 0; f < shards; ++f) {
    for (int i = 0; i < per; ++i) {
      TensorToWrite t;
      t.name = "model.layers." + std::to_string(f) + ".mlp.experts." +
               std::to_string(i) + ".down_proj.weight";
      t.dtype = DType::kBF16;
      t.shape = {2, 4};
      t.data = kData;
      files[f].push_back(std::move(t));
    }
  }
  Status written = WriteShardedCheckpoint(dir, std::move(files));
  if (!written.ok()) {
    Fail(state, written.ToString());
  } else {
    for (auto _ : state) {
      StatusOr<Checkpoint> c = Checkpoint::Open(dir);
      if (!c.ok()) {
        Fail(state, c.status().ToString());
        break;
      }
      benchmark::DoNotOptimize(c->tensors().size());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * shards * per);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_OpenShardedCheckpoint)
    ->Args({2, 146})
    ->Args({8, 100})
    ->Args({64, 100})
    ->Args({160, 400})
    ->Unit(benchmark::kMillisecond);

// Plans a load of N tensors of about 16 MiB each from one file, as the host
// loader does: 8 MiB chunks, O_DIRECT alignment 4096. ALIGNED (range(1)):
// destinations congruent to their file offsets (direct reads, as Load()
// lays them out); otherwise misaligned by 64 bytes (every byte bounces).
void BM_MakePlan(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool aligned = state.range(1) != 0;
  constexpr uint64_t kTensorBytes = (16u << 20) + 24;  // odd, like bf16 rows
  std::vector<Segment> segments(n);
  uint64_t off = 4096 + 24;  // data offset of a typical header
  for (int i = 0; i < n; ++i) {
    segments[i].file = 0;
    segments[i].file_offset = off;
    segments[i].length = kTensorBytes;
    // Addresses are never dereferenced by the planner.
    segments[i].dst = uintptr_t{1} << 40 | (off + (aligned ? 0 : 64));
    segments[i].tensor = static_cast<uint32_t>(i);
    off += kTensorBytes;
  }
  PlanFile file;
  file.size = off;
  file.alignment = 4096;
  const std::vector<PlanFile> files = {file};
  for (auto _ : state) {
    Plan p = MakePlan(segments, files, segments.size(), PlanOptions{});
    if (p.bytes_delivered != uint64_t(n) * kTensorBytes) {
      Fail(state, "the plan delivers " + std::to_string(p.bytes_delivered) +
                      " bytes, not " + std::to_string(n * kTensorBytes));
      return;
    }
    benchmark::DoNotOptimize(p.chunks.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * n);
}
BENCHMARK(BM_MakePlan)
    ->Args({291, 1})
    ->Args({291, 0})
    ->Args({2000, 1})
    ->Args({2000, 0});

}  // namespace
}  // namespace weightlift::internal

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return weightlift::internal::g_failed ? 1 : 0;
}
