// Row runs out of a resident file, T threads at once: one pread per run
// against a mapping of each chunk's covering range populated with
// MADV_POPULATE_READ, then memcpy per run, then munmap (what
// src/env/mapped_rows_file.cc does per chunk). Each thread takes its own
// "tensors" (ROWS runs of WIDTH bytes PITCH apart), disjoint in the file.
//
//   g++ -O2 -pthread rows_probe.cc -o rows_probe
//   ./rows_probe FILE THREADS PITCH WIDTH ROWS TENSORS_PER_THREAD
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

int main(int argc, char** argv) {
  if (argc < 7) return 2;
  const int fd = open(argv[1], O_RDONLY);
  const int threads = atoi(argv[2]);
  const size_t pitch = atol(argv[3]), width = atol(argv[4]),
               rows = atol(argv[5]);
  const int per = atoi(argv[6]);
  const size_t size = lseek(fd, 0, SEEK_END);
  const size_t cover = (rows - 1) * pitch + width;
  const size_t page = 4096;
  if (cover * threads * per + page > size) {
    fprintf(stderr, "file too small\n");
    return 2;
  }
  for (int mode = 0; mode < 2; ++mode) {
    std::atomic<long> pop_ns{0}, cpy_ns{0}, unmap_ns{0};
    auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        std::vector<char> dst(rows * width);
        for (int k = 0; k < per; ++k) {
          const size_t base = (size_t(t) * per + k) * cover + 123;
          if (mode == 0) {
            for (size_t r = 0; r < rows; ++r)
              if (pread(fd, dst.data() + r * width, width, base + r * pitch) !=
                  (ssize_t)width)
                abort();
            continue;
          }
          const size_t start = base / page * page;
          const size_t len = base + cover - start;
          auto a = Clock::now();
          char* m = (char*)mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, start);
          if (m == MAP_FAILED || madvise(m, len, MADV_POPULATE_READ) != 0)
            abort();
          auto b = Clock::now();
          const char* s = m + (base - start);
          for (size_t r = 0; r < rows; ++r)
            memcpy(dst.data() + r * width, s + r * pitch, width);
          auto c = Clock::now();
          munmap(m, len);
          auto d = Clock::now();
          pop_ns += (b - a).count();
          cpy_ns += (c - b).count();
          unmap_ns += (d - c).count();
        }
      });
    }
    for (auto& th : ts) th.join();
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const double runs = double(rows) * per * threads;
    printf(
        "%s threads %d pitch %zu width %zu: %.1f ms wall, %.3f us per run "
        "(thread time)",
        mode ? "mapping" : "pread  ", threads, pitch, width, ms,
        ms * 1e3 * threads / runs);
    if (mode)
      printf(
          "; per covering page: populate %.0f ns, munmap %.0f ns; copy "
          "%.0f ns per run",
          pop_ns / (runs / rows * cover / page),
          unmap_ns / (runs / rows * cover / page), cpy_ns / runs);
    printf("\n");
  }
  return 0;
}
