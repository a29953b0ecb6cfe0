// Session 9 probe: does coalescing the staging ring's 4 MiB copies into
// larger ones lift the page cache -> pinned ring -> device pipeline towards
// the one-big-copy ceiling? Without weightlift.
//
//   T threads pread chunks of SLOT bytes (taken in order from a shared
//   counter) out of FILES into a pinned ring of S slots; chunk i lands in
//   slot i % S. Copies to one device buffer (file bytes back to back):
//     per-slot  each chunk copied by its reader on the reader's stream
//               (the loader's method today)
//     run R     chunks are copied in order, in runs of up to R adjacent
//               slots, by the reader that completes a run (or, when the
//               device went idle, whatever prefix is filled)
//   plus pure DMA rates of K MiB copies out of the ring (no reads).
// Usage: coalesce_probe ROUNDS FILE...
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                       \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

using Clock = std::chrono::steady_clock;
static double Secs(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

struct Chunk {
  int fd;
  size_t off, len, dst;
};

struct Setup {
  std::vector<Chunk> chunks;
  size_t total = 0;
  char* dev = nullptr;
  char* ring = nullptr;
  size_t ring_bytes = 0;
};

static std::vector<Chunk> MakeChunks(const std::vector<int>& fds,
                                     const std::vector<size_t>& sizes,
                                     size_t slot) {
  std::vector<Chunk> out;
  size_t dst = 0;
  for (size_t f = 0; f < fds.size(); ++f) {
    for (size_t o = 0; o < sizes[f]; o += slot) {
      size_t n = std::min(slot, sizes[f] - o);
      out.push_back({fds[f], o, n, dst});
      dst += n;
    }
  }
  return out;
}

static void PreadAll(int fd, char* buf, size_t n, size_t off) {
  while (n > 0) {
    ssize_t r = pread(fd, buf, n, static_cast<off_t>(off));
    if (r <= 0) {
      std::perror("pread");
      std::exit(1);
    }
    buf += r;
    n -= static_cast<size_t>(r);
    off += static_cast<size_t>(r);
  }
}

// The loader's method: per-slot copies on the reader's stream, each slot
// reused once its event completed.
static double RunPerSlot(Setup& s, size_t slot, int threads) {
  const int per = static_cast<int>(s.ring_bytes / slot) / threads;
  std::atomic<size_t> next{0};
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int w = 0; w < threads; ++w) {
    ts.emplace_back([&, w] {
      cudaStream_t st;
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      std::vector<cudaEvent_t> ev(per);
      std::vector<bool> busy(per, false);
      for (auto& e : ev)
        CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      int k = 0;
      for (;;) {
        size_t i = next.fetch_add(1);
        if (i >= s.chunks.size()) break;
        const Chunk& c = s.chunks[i];
        char* buf = s.ring + (static_cast<size_t>(k) * threads + w) * slot;
        if (busy[k]) CK(cudaEventSynchronize(ev[k]));
        PreadAll(c.fd, buf, c.len, c.off);
        CK(cudaMemcpyAsync(s.dev + c.dst, buf, c.len, cudaMemcpyHostToDevice,
                           st));
        CK(cudaEventRecord(ev[k], st));
        busy[k] = true;
        k = (k + 1) % per;
      }
      CK(cudaStreamSynchronize(st));
      for (auto& e : ev) cudaEventDestroy(e);
      cudaStreamDestroy(st);
    });
  }
  for (auto& t : ts) t.join();
  return Secs(t0);
}

// In-order coalesced copies: chunk i in slot i % S; a run of filled slots
// [cursor, end) is issued as one copy per contiguous (ring, device) span.
struct Coalescer {
  Setup& s;
  size_t slot;
  int S, R;
  std::mutex mu;
  std::vector<int> filled;           // per slot: chunk index + 1 when filled
  std::vector<cudaEvent_t> slot_ev;  // per slot: event of its run's copy
  std::vector<long> slot_chunk;      // per slot: chunk whose copy is issued
  size_t cursor = 0;                 // first chunk not yet issued
  cudaEvent_t last_ev = nullptr;     // the latest issued run
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> ev_pool;
  size_t ev_next = 0;
  int runs = 0;

  Coalescer(Setup& s_, size_t slot_, int R_) : s(s_), slot(slot_), R(R_) {
    S = static_cast<int>(s.ring_bytes / slot);
    filled.assign(S, 0);
    slot_ev.assign(S, nullptr);
    slot_chunk.assign(S, -1);
    streams.resize(4);
    for (auto& st : streams)
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    ev_pool.resize(S * 2);
    for (auto& e : ev_pool)
      CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~Coalescer() {
    for (auto& e : ev_pool) cudaEventDestroy(e);
    for (auto& st : streams) cudaStreamDestroy(st);
  }

  // Under mu: issue filled slots from the cursor, if the policy says so.
  void MaybeIssue(bool force) {
    for (;;) {
      size_t end = cursor;
      while (end < s.chunks.size() && end - cursor < static_cast<size_t>(R) &&
             filled[end % S] == static_cast<int>(end) + 1 &&
             (end == cursor || end % S != 0)) {
        ++end;
      }
      if (end == cursor) return;
      const bool full = end - cursor == static_cast<size_t>(R) ||
                        end % S == 0 || end == s.chunks.size();
      const bool idle =
          last_ev == nullptr || cudaEventQuery(last_ev) == cudaSuccess;
      if (!full && !idle && !force) return;
      cudaStream_t st = streams[runs % streams.size()];
      ++runs;
      // One copy per span contiguous in both the ring and the device.
      size_t a = cursor;
      while (a < end) {
        size_t b = a + 1;
        while (b < end && s.chunks[b - 1].len == slot &&
               s.chunks[b].dst == s.chunks[b - 1].dst + s.chunks[b - 1].len) {
          ++b;
        }
        size_t bytes =
            s.chunks[b - 1].dst + s.chunks[b - 1].len - s.chunks[a].dst;
        CK(cudaMemcpyAsync(s.dev + s.chunks[a].dst, s.ring + (a % S) * slot,
                           bytes, cudaMemcpyHostToDevice, st));
        a = b;
      }
      cudaEvent_t ev = ev_pool[ev_next++ % ev_pool.size()];
      CK(cudaEventRecord(ev, st));
      for (size_t i = cursor; i < end; ++i) {
        slot_ev[i % S] = ev;
        slot_chunk[i % S] = static_cast<long>(i);
      }
      last_ev = ev;
      cursor = end;
    }
  }

  double Run(int threads) {
    std::atomic<size_t> next{0};
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int w = 0; w < threads; ++w) {
      ts.emplace_back([&] {
        for (;;) {
          size_t i = next.fetch_add(1);
          if (i >= s.chunks.size()) break;
          const int k = static_cast<int>(i % S);
          // Slot k free: its previous chunk (i - S) issued and copied.
          if (i >= static_cast<size_t>(S)) {
            for (;;) {
              cudaEvent_t ev = nullptr;
              {
                std::lock_guard<std::mutex> g(mu);
                if (slot_chunk[k] == static_cast<long>(i - S)) {
                  ev = slot_ev[k];
                } else if (filled[k] == static_cast<int>(i - S) + 1) {
                  MaybeIssue(true);  // the copy waits for us: issue it now
                  continue;
                }
              }
              if (ev != nullptr) {
                CK(cudaEventSynchronize(ev));
                break;
              }
              std::this_thread::yield();
            }
          }
          const Chunk& c = s.chunks[i];
          PreadAll(c.fd, s.ring + static_cast<size_t>(k) * slot, c.len, c.off);
          std::lock_guard<std::mutex> g(mu);
          filled[k] = static_cast<int>(i) + 1;
          MaybeIssue(false);
        }
        std::lock_guard<std::mutex> g(mu);
        MaybeIssue(true);
      });
    }
    for (auto& t : ts) t.join();
    CK(cudaDeviceSynchronize());
    return Secs(t0);
  }
};

static double RunDma(Setup& s, size_t copy, int nstreams) {
  std::vector<cudaStream_t> st(nstreams);
  for (auto& x : st) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  auto t0 = Clock::now();
  size_t k = 0;
  for (size_t off = 0; off < s.total; off += copy, ++k) {
    size_t n = std::min(copy, s.total - off);
    size_t r = (k * copy) % (s.ring_bytes - copy + 1);
    CK(cudaMemcpyAsync(s.dev + off, s.ring + r, n, cudaMemcpyHostToDevice,
                       st[k % nstreams]));
  }
  CK(cudaDeviceSynchronize());
  double t = Secs(t0);
  for (auto& x : st) cudaStreamDestroy(x);
  return t;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int rounds = std::atoi(argv[1]);
  std::vector<int> fds;
  std::vector<size_t> sizes;
  Setup s;
  for (int a = 2; a < argc; ++a) {
    int fd = open(argv[a], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
      std::perror(argv[a]);
      return 1;
    }
    fds.push_back(fd);
    sizes.push_back(static_cast<size_t>(st.st_size));
    s.total += static_cast<size_t>(st.st_size);
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  CK(cudaMalloc(reinterpret_cast<void**>(&s.dev), s.total));
  const size_t max_ring = 256u << 20;
  s.ring = static_cast<char*>(std::aligned_alloc(2u << 20, max_ring));
  std::memset(s.ring, 1, max_ring);
  CK(cudaHostRegister(s.ring, max_ring, cudaHostRegisterDefault));
  const double gb = static_cast<double>(s.total) / 1e9;
  std::printf("bytes %zu (%.2f GB)\n", s.total, gb);
  auto show = [&](const char* label, double t) {
    std::printf("%-34s %6.2f GB/s (%.1f ms)\n", label, gb / t, t * 1e3);
    std::fflush(stdout);
  };
  for (int r = 0; r < rounds; ++r) {
    std::printf("-- round %d\n", r + 1);
    s.ring_bytes = 128u << 20;
    for (size_t mib : {4, 8, 16, 32, 64}) {
      char l[64];
      std::snprintf(l, sizeof l, "dma only %zu MiB copies, 4 streams", mib);
      show(l, RunDma(s, mib << 20, 4));
    }
    for (int threads : {16}) {
      const size_t slot = 4u << 20;
      s.chunks = MakeChunks(fds, sizes, slot);
      show("per-slot 4M x16 thr, 128M ring", RunPerSlot(s, slot, threads));
      for (int R : {2, 4, 8, 16}) {
        Coalescer c(s, slot, R);
        char l[64];
        std::snprintf(l, sizeof l, "run %2d x 4M, 16 thr, 128M ring", R);
        show(l, c.Run(threads));
      }
      s.ring_bytes = 64u << 20;
      {
        Coalescer c(s, slot, 8);
        show("run  8 x 4M, 16 thr, 64M ring", c.Run(threads));
      }
      s.ring_bytes = 128u << 20;
      s.chunks = MakeChunks(fds, sizes, 2u << 20);
      {
        Coalescer c(s, 2u << 20, 16);
        show("run 16 x 2M, 16 thr, 128M ring", c.Run(threads));
      }
    }
  }
  // Verify the last coalesced run's bytes against the files (sampled).
  std::vector<char> a(1 << 20), b(1 << 20);
  size_t bad = 0, off = 0;
  for (size_t f = 0; f < fds.size(); ++f) {
    for (size_t o = 0; o + a.size() <= sizes[f]; o += 997u << 20) {
      PreadAll(fds[f], a.data(), a.size(), o);
      CK(cudaMemcpy(b.data(), s.dev + off + o, b.size(),
                    cudaMemcpyDeviceToHost));
      bad += std::memcmp(a.data(), b.data(), a.size()) != 0;
    }
    off += sizes[f];
  }
  std::printf("sampled verify: %zu mismatching MiB\n", bad);
  return bad != 0;
}
