// What a rank's row runs cost when the mapping's page tables are already
// filled (session 19 probe). Same layout as session 8's rows_probe2.cc: a
// Llama-2-7B rank's row-parallel parts at n = 8 (32 o_proj: 4096 rows of
// 1024 bytes, 8192 apart; 32 down_proj: 4096 rows of 2752 bytes, 22016
// apart), T threads taking tensors from a shared counter and copying each
// tensor's runs into a 4 MiB buffer of their own (reused, as a staging slot
// is). Modes, each on a fresh whole-file mapping:
//   faults   the loader today: the copies take the page faults
//   prefault the covering range of each tensor populated first
//            (MADV_POPULATE_READ), timed apart with 1 and T threads; then
//            the same copies
//
//   g++ -O2 -std=c++20 -pthread rows_prefault.cc -o rows_prefault
//   ./rows_prefault FILE THREADS [REPS]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

using Clock = std::chrono::steady_clock;
static double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
struct Tensor {
  size_t offset, pitch, width, rows;
};
static const size_t kPage = 4096;

template <class F>
static double Parallel(int threads, size_t n, F&& f) {
  std::atomic<size_t> next{0};
  auto t0 = Clock::now();
  std::vector<std::thread> th;
  for (int i = 0; i < threads; ++i)
    th.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < n;) f(k);
    });
  for (auto& t : th) t.join();
  return Ms(t0, Clock::now());
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int threads = atoi(argv[2]);
  const int reps = argc > 3 ? atoi(argv[3]) : 3;
  const int fd = open(argv[1], O_RDONLY);
  const size_t fsize = lseek(fd, 0, SEEK_END);
  std::vector<Tensor> ts;
  size_t layer = 4096ull * 8192 + 4096ull * 22016, off = 0;
  for (int l = 0; l < 32; ++l) {
    ts.push_back({off + 123 * 64, 8192, 1024, 4096});
    ts.push_back({off + 4096ull * 8192 + 64, 22016, 2752, 4096});
    off += layer;
  }
  if (off > fsize) return fprintf(stderr, "file too small\n"), 2;
  size_t bytes = 0, runs = 0;
  for (auto& t : ts) bytes += t.width * t.rows, runs += t.rows;
  std::vector<std::vector<char>> slot(threads, std::vector<char>(4 << 20, 1));
  std::atomic<int> tid{0};
  thread_local int me = -1;
  auto copy = [&](char* base) {
    return [&, base](size_t k) {
      if (me < 0) me = tid.fetch_add(1);
      const Tensor& t = ts[k];
      char* dst = slot[me % threads].data();
      size_t used = 0;
      for (size_t r = 0; r < t.rows; ++r) {
        if (used + t.width > slot[0].size()) used = 0;
        memcpy(dst + used, base + t.offset + r * t.pitch, t.width);
        used += t.width;
      }
    };
  };
  printf("%zu row runs, %.1f MB, %d threads\n", runs, bytes / 1e6, threads);
  for (int rep = 0; rep < reps; ++rep) {
    for (int mode = 0; mode < 3; ++mode) {
      char* base = static_cast<char*>(
          mmap(nullptr, fsize, PROT_READ, MAP_SHARED, fd, 0));
      if (base == MAP_FAILED) return perror("mmap"), 1;
      double pop = 0;
      if (mode > 0) {
        const int pt = mode == 1 ? 1 : threads;
        pop = Parallel(pt, ts.size(), [&](size_t k) {
          const Tensor& t = ts[k];
          size_t s = t.offset / kPage * kPage;
          size_t e = t.offset + (t.rows - 1) * t.pitch + t.width;
          if (madvise(base + s, e - s, MADV_POPULATE_READ) != 0) abort();
        });
      }
      tid = 0;
      double ms = Parallel(threads, ts.size(), copy(base));
      auto u0 = Clock::now();
      munmap(base, fsize);
      double un = Ms(u0, Clock::now());
      printf(
          "rep %d %-22s copies %7.2f ms (%.2f us/run of thread time, "
          "%.1f GB/s)  populate %7.2f ms  munmap %.2f ms\n",
          rep,
          mode == 0   ? "faults"
          : mode == 1 ? "prefault (1 thread)"
                      : "prefault (T threads)",
          ms, ms * threads * 1e3 / runs, bytes / ms / 1e6, pop, un);
      fflush(stdout);
    }
  }
}
