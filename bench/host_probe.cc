// host_probe: the host loader against the storage and page-cache ceilings,
// measured in the same run. Not the `weightlift bench` command; a probe for
// tuning the host engine.
//
//   host_probe --make DIR [--gb 3.2]    write a synthetic 2-shard checkpoint
//   host_probe DIR [--threads N] [--chunk-mib M] [--backend B] [--rounds R]
//
// For each round: cold (pages evicted) raw O_DIRECT io_uring QD16 read, then
// a cold load; warm (pages resident) raw buffered read, then a warm load.
// Prints GB/s, the ratio to the ceiling, and peak RSS beyond destinations
// (VmHWM reset through /proc/self/clear_refs before each load).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "env/page_cache.h"
#include "exec/host_loader.h"
#include "format/writer.h"
#include "raw_read.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

using namespace weightlift;
using namespace weightlift::internal;

namespace {

uint64_t ProcStatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0)
      return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10);
  }
  return 0;
}

void ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

int Make(const std::string& dir, double gb) {
  ::mkdir(dir.c_str(), 0755);
  // A transformer-like mix: per "layer" 4 attention matrices of 4096x4096
  // bf16 (32 MiB), 3 MLP matrices of 4096x11008 (86 MiB), 2 norms (8 KiB).
  const uint64_t layer_bytes =
      4ull * 4096 * 4096 * 2 + 3ull * 4096 * 11008 * 2 + 2 * 8192;
  const int layers = std::max(1, static_cast<int>(gb * 1e9 / layer_bytes));
  std::vector<std::vector<TensorToWrite>> shards(2);
  auto gen = [](uint64_t seed) {
    return [seed](uint64_t off, std::span<std::byte> out) {
      uint64_t x = seed ^ (off * 0x9E3779B97F4A7C15ull);
      for (size_t i = 0; i < out.size(); i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(out.data() + i, &x, std::min<size_t>(8, out.size() - i));
      }
    };
  };
  for (int l = 0; l < layers; ++l) {
    auto& shard = shards[l * 2 / layers];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto add = [&](std::string name, std::vector<uint64_t> shape) {
      TensorToWrite t;
      t.name = p + name;
      t.dtype = DType::kBF16;
      t.shape = std::move(shape);
      t.generate = gen(std::hash<std::string>()(t.name));
      shard.push_back(std::move(t));
    };
    for (const char* n :
         {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
          "self_attn.v_proj.weight", "self_attn.o_proj.weight"}) {
      add(n, {4096, 4096});
    }
    add("mlp.gate_proj.weight", {11008, 4096});
    add("mlp.up_proj.weight", {11008, 4096});
    add("mlp.down_proj.weight", {4096, 11008});
    add("input_layernorm.weight", {4096});
    add("post_attention_layernorm.weight", {4096});
  }
  Status s = WriteShardedCheckpoint(dir, std::move(shards));
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("wrote %d layers to %s\n", layers, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  LoadOptions opt;
  int rounds = 1;
  bool do_cold = true, do_warm = true;
  bool into = false;  // LoadInto pre-touched memory, congruent to offsets
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--make") {
      std::string dir = next();
      double gb = 3.2;
      if (i + 2 < argc + 1 && i + 1 < argc &&
          std::string(argv[i + 1]) == "--gb") {
        ++i;
        gb = std::atof(next().c_str());
      }
      return Make(dir, gb);
    } else if (a == "--threads") {
      opt.threads = std::atoi(next().c_str());
    } else if (a == "--chunk-mib") {
      opt.chunk_bytes =
          static_cast<size_t>(std::atof(next().c_str()) * (1 << 20));
    } else if (a == "--staging-mib") {
      opt.staging_bytes =
          static_cast<size_t>(std::atof(next().c_str()) * (1 << 20));
    } else if (a == "--qd") {
      opt.queue_depth = std::atoi(next().c_str());
    } else if (a == "--backend") {
      auto b = ParseBackend(next());
      if (!b.ok()) return 2;
      opt.backend = *b;
    } else if (a == "--rounds") {
      rounds = std::atoi(next().c_str());
    } else if (a == "--into") {
      into = true;
    } else if (a == "--cold-only") {
      do_warm = false;
    } else if (a == "--warm-only") {
      do_cold = false;
    } else {
      path = a;
    }
  }
  auto ckpt = Checkpoint::Open(path);
  if (!ckpt.ok()) {
    std::fprintf(stderr, "%s\n", ckpt.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> files;
  for (const auto& f : ckpt->files()) files.push_back(f.path);
  auto loader = CreateHostLoader(opt);
  if (!loader.ok()) {
    std::fprintf(stderr, "%s\n", loader.status().ToString().c_str());
    return 1;
  }
  const double gb = ckpt->total_bytes() / 1e9;
  std::printf(
      "checkpoint %s: %zu files, %zu tensors, %.2f GB; data offset %% 64 = "
      "%llu\n",
      path.c_str(), files.size(), ckpt->tensors().size(), gb,
      (unsigned long long)(ckpt->files()[0].data_offset % 64));
  // --into: destinations in one pre-touched buffer, each at an address
  // congruent to its file offset modulo 4096 (what a caller can do to get
  // direct reads whatever the file's alignment).
  std::vector<Destination> dests;
  std::vector<std::byte> arena;
  if (into) {
    uint64_t pos = 0;
    std::vector<uint64_t> at;
    for (const auto& t : ckpt->tensors()) {
      pos = (pos + 4095) / 4096 * 4096 + t.offset % 4096;
      at.push_back(pos);
      pos += t.size;
    }
    arena.assign(pos + 8192, std::byte{1});
    std::byte* base = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(arena.data()) + 4095) / 4096 * 4096);
    for (size_t i = 0; i < at.size(); ++i) {
      dests.push_back(
          {ckpt->tensors()[i].name, base + at[i], ckpt->tensors()[i].size});
    }
  }
  auto load = [&](const char* label, double ceiling) -> double {
    ResetPeakRss();
    const uint64_t before = ProcStatusKb("VmRSS:");
    StatusOr<LoadResult> r = Status::Internal("unset");
    if (into) {
      LoadResult lr;
      Status s = (*loader)->LoadInto(*ckpt, dests, &lr.report);
      if (s.ok())
        r = std::move(lr);
      else
        r = s;
    } else {
      r = (*loader)->Load(*ckpt);
    }
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      std::exit(1);
    }
    const uint64_t peak = ProcStatusKb("VmHWM:");
    const double over_mib =
        (static_cast<double>(peak - before) * 1024 -
         (into ? 0.0 : static_cast<double>(ckpt->total_bytes()))) /
        (1 << 20);
    std::printf(
        "  %-5s load: %.2f GB/s (%.3f s) = %.2fx ceiling; RSS beyond "
        "destinations %.1f MiB; threads %d\n",
        label, r->report.gb_per_s(), r->report.seconds,
        r->report.gb_per_s() / ceiling, over_mib, r->report.threads);
    std::printf("%s", r->report.ToString().c_str());
    return r->report.gb_per_s();
  };
  for (int round = 0; round < rounds; ++round) {
    if (do_cold) {
      for (auto& f : files) (void)EvictFromPageCache(f);
      auto raw = RawDirectRead(files);
      if (!raw.ok()) return 1;
      std::printf("cold ceiling: %.2f GB/s (%s)\n", raw->gb_per_s(),
                  raw->method.c_str());
      for (auto& f : files) (void)EvictFromPageCache(f);
      load("cold", raw->gb_per_s());
    }
    if (do_warm) {
      RawReadOptions ro;
      ro.block_bytes = 1 << 20;
      (void)RawBufferedRead(files, ro);  // make resident
      auto raw = RawBufferedRead(files, ro);
      if (!raw.ok()) return 1;
      std::printf("warm ceiling: %.2f GB/s (%s)\n", raw->gb_per_s(),
                  raw->method.c_str());
      ro.target_bytes = 256u << 20;
      auto dram = RawBufferedRead(files, ro);
      if (!dram.ok()) return 1;
      std::printf("warm ceiling to DRAM: %.2f GB/s (%s)\n", dram->gb_per_s(),
                  dram->method.c_str());
      const double w = load("warm", raw->gb_per_s());
      std::printf("  warm load = %.2fx the DRAM-bound ceiling\n",
                  w / dram->gb_per_s());
    }
  }
  return 0;
}
