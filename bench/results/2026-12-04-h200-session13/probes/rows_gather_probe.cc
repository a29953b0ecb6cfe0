// Probe (session 13): what limits copying short row runs out of a mapping of
// the page cache? A Llama-2-7B rank 0 of 8's row-parallel parts, simulated
// over a real resident file: per layer one o_proj part (4096 runs of 1024 B,
// pitch 8192) and one down_proj part (4096 runs of 2752 B, pitch 22016),
// split into chunks of at most 4 MiB gathered, spread over T threads, each
// gathering into its own two 4 MiB buffers (a staging slot's size).
//
//   rows_gather_probe FILE THREADS[,THREADS...] ROUNDS
//
// Modes, each on a fresh whole-file mapping (munmap after):
//   fault      memcpy per run (main's CopyRows), faults as they come
//   fault+pfN  the same with software prefetch of the rows N ahead
//   populated  MADV_POPULATE_READ over each tensor's covering range first
//              (not timed): the copies alone, no faults
//   populated+pfN
//   pread      one pread per run (shared descriptor)
//   contig     the same gathered byte count, read as contiguous 4 MiB preads
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

struct Chunk {
  uint64_t offset, pitch, width, rows;
};

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static void copy_rows(const char* src, uint64_t pitch, uint64_t width,
                      uint64_t rows, char* dst, int pf, uint64_t span) {
  if (pf == 0) {
    for (uint64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * width, src + r * pitch, width);
    return;
  }
  for (uint64_t r = 0; r < rows; ++r) {
    if (r + pf < rows) {
      const char* p = src + (r + pf) * pitch;
      for (uint64_t b = 0; b < std::min(span, width); b += 64)
        _mm_prefetch(p + b, _MM_HINT_T0);
    }
    std::memcpy(dst + r * width, src + r * pitch, width);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s FILE THREADS ROUNDS\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  std::vector<int> thread_counts;
  for (const char* p = argv[2]; *p;) {
    thread_counts.push_back(atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  int threads = 0;
  for (int t : thread_counts) threads = std::max(threads, t);
  const int rounds = atoi(argv[3]);
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  struct stat st;
  fstat(fd, &st);
  const uint64_t size = st.st_size;
  // 32 layers' parts, laid out one after another from 1 MiB in.
  const uint64_t kSlot = 4u << 20;
  std::vector<Chunk> chunks;
  uint64_t at = 1u << 20, gathered = 0;
  struct Part {
    uint64_t pitch, width, rows;
  };
  const Part parts[2] = {{8192, 1024, 4096}, {22016, 2752, 4096}};
  for (int layer = 0; layer < 32; ++layer) {
    for (const Part& p : parts) {
      const uint64_t cover = p.pitch * p.rows;
      if (at + cover > size) at = 1u << 20;  // small file: wrap
      const uint64_t per = std::max<uint64_t>(1, kSlot / p.width);
      for (uint64_t r = 0; r < p.rows; r += per) {
        const uint64_t n = std::min(per, p.rows - r);
        chunks.push_back({at + r * p.pitch, p.pitch, p.width, n});
        gathered += n * p.width;
      }
      at += cover;
    }
  }
  printf("file %s (%.2f GB), %zu chunks, %.1f MB gathered, %d threads\n", path,
         size / 1e9, chunks.size(), gathered / 1e6, threads);
  std::vector<std::vector<char>> bufs(threads);
  for (auto& b : bufs) b.assign(2 * kSlot, 1);

  struct Mode {
    std::string name;
    int kind;
    int pf;
    uint64_t span;
  };
  // kind 0 fault, 1 populated, 2 pread, 3 contig
  const uint64_t kAll = ~uint64_t(0);
  std::vector<Mode> modes = {
      {"fault", 0, 0, kAll},           {"fault+pf2", 0, 2, kAll},
      {"fault+pf4", 0, 4, kAll},       {"fault+pf8", 0, 8, kAll},
      {"fault+pf4,2l", 0, 4, 128},     {"populated", 1, 0, kAll},
      {"populated+pf2", 1, 2, kAll},   {"populated+pf4", 1, 4, kAll},
      {"populated+pf4,2l", 1, 4, 128}, {"pread", 2, 0, kAll},
      {"contig", 3, 0, kAll}};
  for (const int nthreads : thread_counts)
    for (int round = 0; round < rounds; ++round) {
      for (const Mode& m : modes) {
        char* map = nullptr;
        if (m.kind <= 1) {
          map = (char*)mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
          if (map == MAP_FAILED) {
            perror("mmap");
            return 1;
          }
        }
        double pop_s = 0;
        if (m.kind == 1) {
          const double p0 = now();
          for (const Chunk& c : chunks) {
            const uint64_t a = c.offset & ~uint64_t(4095);
            const uint64_t e = c.offset + (c.rows - 1) * c.pitch + c.width;
            if (madvise(map + a, e - a, MADV_POPULATE_READ) != 0) {
              perror("madvise");
              return 1;
            }
          }
          pop_s = now() - p0;
        }
        std::atomic<size_t> next{0};
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        const double t0 = now();
        std::vector<std::thread> ts;
        for (int t = 0; t < nthreads; ++t) {
          ts.emplace_back([&, t] {
            int slot = 0;
            for (;;) {
              const size_t i = next.fetch_add(1);
              if (i >= chunks.size()) break;
              const Chunk& c = chunks[i];
              char* dst = bufs[t].data() + slot * kSlot;
              slot ^= 1;
              if (m.kind <= 1) {
                copy_rows(map + c.offset, c.pitch, c.width, c.rows, dst, m.pf,
                          m.span);
              } else if (m.kind == 2) {
                for (uint64_t r = 0; r < c.rows; ++r)
                  if (pread(fd, dst + r * c.width, c.width,
                            c.offset + r * c.pitch) != (ssize_t)c.width)
                    abort();
              } else {
                const uint64_t n = c.rows * c.width;
                if (pread(fd, dst, n, c.offset) != (ssize_t)n) abort();
              }
            }
          });
        }
        for (auto& th : ts) th.join();
        const double dt = now() - t0;
        getrusage(RUSAGE_SELF, &r1);
        if (map) munmap(map, size);
        printf(
            "threads %2d round %d %-17s %7.2f ms  %6.2f GB/s  minflt %ld%s\n",
            nthreads, round, m.name.c_str(), dt * 1e3, gathered / dt / 1e9,
            r1.ru_minflt - r0.ru_minflt,
            m.kind == 1 ? (" (populate " +
                           std::to_string(pop_s * 1e3).substr(0, 6) + " ms)")
                              .c_str()
                        : "");
        fflush(stdout);
      }
    }
  return 0;
}
