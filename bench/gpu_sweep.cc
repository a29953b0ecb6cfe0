// gpu_sweep: tunes and checks the CUDA loader on one machine.
//
//   gpu_sweep --synth DIR                 write a Llama-2-7B-layout checkpoint
//   gpu_sweep --dir DIR [--device N]      warm sweep of both CUDA paths
//             [--cold-dir DIR2]           + cold runs against the raw disk
//             [--chunks 1,2,4,8,16,32] [--threads 4,8,12,16]
//             [--slots 2,3,4] [--pieces 64,256,1024] [--runs 3]
//
// Every configuration: one warm-up load, then RUNS timed loads (best kept),
// each from LoadInto into one preallocated device buffer, synchronized (the
// loader returns only after every copy completed). GB/s = tensor bytes / s.
// Printed next to the pinned host->device ceiling measured in the same run.
// With defaults, Load() (fresh allocation each time), LoadInto() and Load()
// into touched fresh memory run interleaved; each run is printed.
#include <cuda_runtime_api.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_loader.h"
#include "cuda/device_available.h"
#include "device_baselines.h"
#include "env/page_cache.h"
#include "raw_read.h"
#include "st_builder.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

using namespace weightlift;

namespace {

std::vector<uint64_t> ParseList(const char* s) {
  std::vector<uint64_t> v;
  while (*s) {
    char* end = nullptr;
    v.push_back(std::strtoull(s, &end, 10));
    s = *end ? end + 1 : end;
  }
  return v;
}

struct Args {
  std::string dir, cold_dir, synth;
  int device = 0;
  int runs = 3;
  std::vector<uint64_t> chunks_mib = {1, 2, 4, 8, 16, 32};
  std::vector<uint64_t> threads = {4, 8, 12, 16};
  std::vector<uint64_t> slots = {2, 3, 4};
  std::vector<uint64_t> pieces_mib = {64, 256, 1024};
  std::vector<uint64_t> hr_threads = {4, 8, 16};
};

struct Timed {
  bool ok = false;
  double best_s = 0, median_s = 0;
  std::string error, path_taken;
};

// Allocates one device buffer for every tensor of CK (256-aligned) and
// returns the destinations.
class DeviceArena {
 public:
  DeviceArena(const Checkpoint& ck, int device) {
    cudaSetDevice(device);
    uint64_t total = 0;
    std::vector<uint64_t> offs;
    for (const TensorInfo& t : ck.tensors()) {
      total = (total + 255) / 256 * 256;
      offs.push_back(total);
      total += t.size;
    }
    if (cudaMalloc(&base_, total) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc of %llu bytes failed\n",
                   static_cast<unsigned long long>(total));
      std::exit(2);
    }
    for (size_t i = 0; i < ck.tensors().size(); ++i) {
      const TensorInfo& t = ck.tensors()[i];
      dests_.push_back({t.name, static_cast<char*>(base_) + offs[i], t.size});
    }
  }
  ~DeviceArena() { cudaFree(base_); }
  const std::vector<Destination>& dests() const { return dests_; }

 private:
  void* base_ = nullptr;
  std::vector<Destination> dests_;
};

Timed TimeLoads(const LoadOptions& o, const Checkpoint& ck,
                const DeviceArena& arena, int runs) {
  Timed t;
  auto loader = Loader::Create(o);
  if (!loader.ok()) {
    t.error = loader.status().ToString();
    return t;
  }
  std::vector<double> secs;
  for (int i = 0; i <= runs; ++i) {
    LoadReport rep;
    auto t0 = std::chrono::steady_clock::now();
    Status s = (*loader)->LoadInto(ck, arena.dests(), &rep);
    double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (!s.ok()) {
      t.error = s.ToString();
      return t;
    }
    if (!rep.files.empty()) t.path_taken = rep.files[0].path_taken;
    if (i > 0) secs.push_back(sec);  // i == 0: warm-up
  }
  std::sort(secs.begin(), secs.end());
  t.ok = true;
  t.best_s = secs.front();
  t.median_s = secs[secs.size() / 2];
  return t;
}

double Gbps(uint64_t bytes, double s) { return s > 0 ? bytes / s / 1e9 : 0; }

int Synth(const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  std::string err;
  auto t0 = std::chrono::steady_clock::now();
  if (!testing::WriteShardedCheckpoint(dir, testing::Llama2_7bShards(), 42,
                                       &err)) {
    std::fprintf(stderr, "synth failed: %s\n", err.c_str());
    return 1;
  }
  std::printf(
      "synthesized llama2-7b layout into %s in %.1f s\n", dir.c_str(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count());
  return 0;
}

std::vector<std::string> Paths(const Checkpoint& ck) {
  std::vector<std::string> p;
  for (auto& f : ck.files()) p.push_back(f.path);
  return p;
}

void Warm(const Checkpoint& ck) {
  auto paths = Paths(ck);
  internal::RawReadOptions ro;
  ro.threads = 16;
  ro.block_bytes = 8u << 20;
  auto r = internal::RawBufferedRead(paths, ro);
  if (r.ok()) {
    std::printf("page-cache read ceiling (%s, no GPU): %.1f GB/s\n",
                r->method.c_str(), r->gb_per_s());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--dir")
      a.dir = next();
    else if (k == "--cold-dir")
      a.cold_dir = next();
    else if (k == "--synth")
      a.synth = next();
    else if (k == "--device")
      a.device = std::atoi(next());
    else if (k == "--runs")
      a.runs = std::max(1, std::atoi(next()));
    else if (k == "--chunks")
      a.chunks_mib = ParseList(next());
    else if (k == "--threads")
      a.threads = ParseList(next());
    else if (k == "--slots")
      a.slots = ParseList(next());
    else if (k == "--pieces")
      a.pieces_mib = ParseList(next());
    else if (k == "--hr-threads")
      a.hr_threads = ParseList(next());
    else {
      std::fprintf(stderr,
                   "unknown argument %s (see the comment at the top "
                   "of bench/gpu_sweep.cc)\n",
                   k.c_str());
      return 2;
    }
  }
  if (!a.synth.empty()) return Synth(a.synth);
  if (a.dir.empty()) {
    std::fprintf(stderr,
                 "usage: gpu_sweep --dir CHECKPOINT_DIR [...] | "
                 "--synth DIR\n");
    return 2;
  }
  std::string why;
  if (!internal::CudaDeviceAvailable(a.device, &why)) {
    std::printf("SKIP: cuda:%d unavailable: %s\n", a.device, why.c_str());
    return 0;
  }
  auto ck = Checkpoint::Open(a.dir);
  if (!ck.ok()) {
    std::fprintf(stderr, "%s\n", ck.status().ToString().c_str());
    return 1;
  }
  const uint64_t bytes = ck->total_bytes();
  std::printf("checkpoint %s: %zu files, %zu tensors, %.2f GB\n", a.dir.c_str(),
              ck->files().size(), ck->tensors().size(), bytes / 1e9);
  auto ceiling = bench::MeasurePinnedCopyGBps(a.device, 4ull << 30);
  double ceil_gbps = ceiling.ok() ? *ceiling : 0;
  std::printf(
      "pinned host->device ceiling (4 GiB, 64 MiB copies, median): "
      "%.1f GB/s\n",
      ceil_gbps);
  Warm(*ck);
  std::fflush(stdout);

  DeviceArena arena(*ck, a.device);
  struct Row {
    std::string what;
    Timed t;
  };
  std::vector<Row> staging_rows, hr_rows;

  std::printf("\n== pinned staging (warm files, host_register=off, gds=off)\n");
  std::printf("%-8s %-8s %-6s %-10s %-9s %-9s %-7s\n", "chunk", "threads",
              "slots", "ring", "best", "median", "ceil%");
  for (uint64_t c : a.chunks_mib) {
    for (uint64_t t : a.threads) {
      for (uint64_t s : a.slots) {
        LoadOptions o;
        o.device = Device::Cuda(a.device);
        o.gds = GdsMode::kOff;
        o.host_register = HostRegisterMode::kOff;
        o.threads = static_cast<int>(t);
        o.cuda_chunk_bytes = c << 20;
        o.staging_bytes = (c << 20) * t * s;
        Timed r = TimeLoads(o, *ck, arena, a.runs);
        char what[128];
        std::snprintf(what, sizeof what,
                      "chunk %llu MiB, %llu threads, %llu "
                      "slots/thread",
                      (unsigned long long)c, (unsigned long long)t,
                      (unsigned long long)s);
        if (!r.ok) {
          std::printf("%-8s %-8llu %-6llu ERROR %s\n",
                      (std::to_string(c) + "M").c_str(), (unsigned long long)t,
                      (unsigned long long)s, r.error.c_str());
        } else {
          std::printf("%-8s %-8llu %-6llu %-10s %-9.1f %-9.1f %-7.0f\n",
                      (std::to_string(c) + "M").c_str(), (unsigned long long)t,
                      (unsigned long long)s,
                      (std::to_string(c * t * s) + "M").c_str(),
                      Gbps(bytes, r.best_s), Gbps(bytes, r.median_s),
                      ceil_gbps ? 100 * Gbps(bytes, r.best_s) / ceil_gbps : 0);
          staging_rows.push_back({what, r});
        }
        std::fflush(stdout);
      }
    }
  }

  std::printf("\n== host-register (warm files, host_register=on)\n");
  std::printf("%-8s %-8s %-9s %-9s %-7s\n", "piece", "threads", "best",
              "median", "ceil%");
  for (uint64_t p : a.pieces_mib) {
    for (uint64_t t : a.hr_threads) {
      LoadOptions o;
      o.device = Device::Cuda(a.device);
      o.gds = GdsMode::kOff;
      o.host_register = HostRegisterMode::kOn;
      o.threads = static_cast<int>(t);
      o.host_register_piece_bytes = p << 20;
      Timed r = TimeLoads(o, *ck, arena, a.runs);
      char what[96];
      std::snprintf(what, sizeof what, "piece %llu MiB, %llu threads",
                    (unsigned long long)p, (unsigned long long)t);
      if (!r.ok) {
        std::printf("%-8s %-8llu ERROR %s\n", (std::to_string(p) + "M").c_str(),
                    (unsigned long long)t, r.error.c_str());
      } else {
        std::printf("%-8s %-8llu %-9.1f %-9.1f %-7.0f\n",
                    (std::to_string(p) + "M").c_str(), (unsigned long long)t,
                    Gbps(bytes, r.best_s), Gbps(bytes, r.median_s),
                    ceil_gbps ? 100 * Gbps(bytes, r.best_s) / ceil_gbps : 0);
        hr_rows.push_back({what, r});
      }
      std::fflush(stdout);
    }
  }

  auto best = [](const std::vector<Row>& rows) -> const Row* {
    const Row* b = nullptr;
    for (auto& r : rows) {
      if (!b || r.t.best_s < b->t.best_s) b = &r;
    }
    return b;
  };
  const Row* bs = best(staging_rows);
  const Row* bh = best(hr_rows);
  std::printf("\n== summary (warm, %.2f GB, ceiling %.1f GB/s)\n", bytes / 1e9,
              ceil_gbps);
  if (bs) {
    std::printf("best staging:       %.1f GB/s  (%s)\n",
                Gbps(bytes, bs->t.best_s), bs->what.c_str());
  }
  if (bh) {
    std::printf("best host-register: %.1f GB/s  (%s)\n",
                Gbps(bytes, bh->t.best_s), bh->what.c_str());
  }
  if (bs && bh) {
    std::printf(
        "RECOMMEND auto for resident files: %s\n",
        bh->t.best_s < bs->t.best_s ? "host-register" : "pinned staging");
  }

  // Defaults, end to end. Interleaved (Load, LoadInto, Load into touched
  // memory, Load, ...) on one loader, so drift of the host or the GPU hits
  // every variant alike:
  //   Load()          allocation included (one cudaMalloc per load)
  //   LoadInto()      into the preallocated arena, used many times before
  //   Load()+touch    Load() whose fresh allocation is cudaMemset in full
  //                   before the copy starts (the memset is timed apart and
  //                   not counted): if fresh device memory is slow to take
  //                   its first DMA, this closes the gap to LoadInto.
  {
    LoadOptions o;
    o.device = Device::Cuda(a.device);
    bool touch = false;
    double memset_s = 0;
    internal::CudaLoaderHooks hooks;
    hooks.after_alloc = [&](void* p, uint64_t n) {
      if (!touch) return;
      auto t0 = std::chrono::steady_clock::now();
      cudaError_t e = cudaMemset(p, 0, n);
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        std::printf("  cudaMemset of the fresh allocation failed: %s\n",
                    cudaGetErrorName(e));
      }
      memset_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
    };
    Status valid = o.Validate();
    auto loader = valid.ok() ? internal::CreateCudaLoader(o, std::move(hooks))
                             : StatusOr<std::unique_ptr<Loader>>(valid);
    if (!loader.ok()) {
      std::printf("defaults: ERROR %s\n", loader.status().ToString().c_str());
    } else {
      struct Variant {
        const char* name = "";
        std::vector<double> secs, memset_secs;
        std::string best_report;
        double best_s = 1e30;
        std::string error;
      };
      Variant load, into, touched;
      load.name = "Load()";
      into.name = "LoadInto()";
      touched.name = "Load()+touch";
      auto run_load = [&](Variant& v, bool with_touch, bool timed) {
        touch = with_touch;
        memset_s = 0;
        auto t0 = std::chrono::steady_clock::now();
        auto r = (*loader)->Load(*ck);
        double sec =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count() -
            memset_s;
        touch = false;
        if (!r.ok()) {
          v.error = r.status().ToString();
          return;
        }
        if (!timed) return;
        v.secs.push_back(sec);
        v.memset_secs.push_back(memset_s);
        std::printf(
            "  %-13s %6.1f GB/s  (alloc %.1f ms, open %.1f ms, "
            "transfer %.3f s",
            v.name, Gbps(bytes, sec), 1e3 * r->report.alloc_seconds,
            1e3 * r->report.open_seconds, r->report.transfer_seconds);
        if (with_touch) {
          std::printf(", memset %.1f ms not counted", 1e3 * memset_s);
        }
        std::printf(")\n");
        if (sec < v.best_s) {
          v.best_s = sec;
          v.best_report = r->report.ToString();
        }
      };  // R (the device memory) is freed here, outside the timing
      auto run_into = [&](Variant& v, bool timed) {
        LoadReport rep;
        auto t0 = std::chrono::steady_clock::now();
        Status st = (*loader)->LoadInto(*ck, arena.dests(), &rep);
        double sec =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        if (!st.ok()) {
          v.error = st.ToString();
          return;
        }
        if (!timed) return;
        v.secs.push_back(sec);
        std::printf("  %-13s %6.1f GB/s  (open %.1f ms, transfer %.3f s)\n",
                    v.name, Gbps(bytes, sec), 1e3 * rep.open_seconds,
                    rep.transfer_seconds);
        if (sec < v.best_s) v.best_s = sec;
      };
      std::printf(
          "\n== defaults, warm: Load / LoadInto / Load+touch "
          "interleaved, %d runs each after one warm-up\n",
          a.runs);
      for (int i = 0; i <= a.runs; ++i) {
        bool timed = i > 0;  // i == 0: warm-up of each
        if (timed) std::printf(" run %d\n", i);
        run_load(load, false, timed);
        run_into(into, timed);
        run_load(touched, true, timed);
        std::fflush(stdout);
      }
      auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      for (const Variant* v : {&load, &into, &touched}) {
        if (!v->error.empty()) {
          std::printf("defaults, %s: ERROR %s\n", v->name, v->error.c_str());
        }
      }
      if (!load.secs.empty()) {
        std::printf(
            "defaults, warm, Load() end to end: %.1f GB/s (%.0f%% of "
            "ceiling)\n%s\n",
            Gbps(bytes, load.best_s),
            ceil_gbps ? 100 * Gbps(bytes, load.best_s) / ceil_gbps : 0,
            load.best_report.c_str());
        std::printf("defaults, warm, Load() end to end: median %.1f GB/s\n",
                    Gbps(bytes, median(load.secs)));
      }
      if (!into.secs.empty()) {
        std::printf(
            "defaults, warm, LoadInto() preallocated: best %.1f GB/s, "
            "median %.1f GB/s\n",
            Gbps(bytes, into.best_s), Gbps(bytes, median(into.secs)));
      }
      if (!touched.secs.empty()) {
        std::printf(
            "defaults, warm, Load() into touched memory: best %.1f "
            "GB/s, median %.1f GB/s (cudaMemset of %.2f GB first: "
            "median %.1f ms, not counted)\n",
            Gbps(bytes, touched.best_s), Gbps(bytes, median(touched.secs)),
            bytes / 1e9, 1e3 * median(touched.memset_secs));
      }
    }
    auto naive = bench::NaiveMmapToDevice(*ck, a.device);
    if (naive.ok()) {
      std::printf(
          "naive mmap + cudaMemcpy per tensor (safetensors-like), "
          "warm: %.1f GB/s\n",
          Gbps(bytes, *naive));
    }
    std::fflush(stdout);
  }

  // Cold: raw disk ceiling vs the loader with defaults.
  if (!a.cold_dir.empty()) {
    auto cck = Checkpoint::Open(a.cold_dir);
    if (!cck.ok()) {
      std::printf("cold: %s\n", cck.status().ToString().c_str());
      return 1;
    }
    auto paths = Paths(*cck);
    auto evict = [&] {
      for (auto& p : paths) (void)internal::EvictFromPageCache(p);
    };
    std::printf("\n== cold (%s, %.2f GB)\n", a.cold_dir.c_str(),
                cck->total_bytes() / 1e9);
    for (int qd : {16, 64}) {
      evict();
      internal::RawReadOptions ro;
      ro.queue_depth = qd;
      ro.block_bytes = 4u << 20;
      auto raw = internal::RawDirectRead(paths, ro);
      if (raw.ok()) {
        std::printf("raw disk read (%s): %.2f GB/s\n", raw->method.c_str(),
                    raw->gb_per_s());
      } else {
        std::printf("raw disk read: %s\n", raw.status().ToString().c_str());
      }
      std::fflush(stdout);
    }
    LoadOptions o;
    o.device = Device::Cuda(a.device);
    auto loader = Loader::Create(o);
    if (loader.ok()) {
      evict();
      auto r = (*loader)->Load(*cck);
      if (r.ok()) {
        std::printf("defaults, cold, Load(): %.2f GB/s\n%s\n",
                    r->report.gb_per_s(), r->report.ToString().c_str());
      } else {
        std::printf("cold load: %s\n", r.status().ToString().c_str());
      }
    }
    for (int t : {4, 16}) {
      LoadOptions oc = o;
      oc.threads = t;
      oc.cuda_chunk_bytes = 8u << 20;
      oc.staging_bytes = (8u << 20) * 2 * t;
      auto l2 = Loader::Create(oc);
      if (!l2.ok()) continue;
      evict();
      auto r = (*l2)->Load(*cck);
      if (r.ok()) {
        std::printf("cold, %d threads x 8 MiB: %.2f GB/s (%s)\n", t,
                    r->report.gb_per_s(),
                    r->report.files.empty()
                        ? ""
                        : r->report.files[0].path_taken.c_str());
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
