// A TP rank's row runs out of a resident file, by several methods, T threads
// at once (session 8 probe). The layout is a Llama-2-7B rank's row-parallel
// parts at n = 8: 32 "o_proj" tensors (4096 rows, 8192-byte pitch, 1024-byte
// runs) and 32 "down_proj" tensors (4096 rows, 22016 pitch, 2752 runs), laid
// out one layer after another from the start of FILE (which must be at least
// 3.8 GB and resident). Threads take tensors from a shared counter.
//
//   g++ -O2 -std=c++20 -pthread rows_probe2.cc -I.deps/include \
//       .deps/lib/liburing.a -o rows_probe2
//   ./rows_probe2 FILE THREADS
#include <fcntl.h>
#include <liburing.h>
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

static void PopulateRule(char* map_base, size_t map_off, const Tensor& t) {
  // the loader's rule: dense covering range unless gaps >= 3 pages
  const size_t first = t.offset - map_off;
  if (t.pitch - t.width < 3 * kPage) {
    size_t s = (first) / kPage * kPage;
    size_t e = first + (t.rows - 1) * t.pitch + t.width;
    if (madvise(map_base + s, e - s, MADV_POPULATE_READ) != 0) abort();
    return;
  }
  for (size_t r = 0; r < t.rows; ++r) {
    size_t a = first + r * t.pitch;
    size_t s = a / kPage * kPage;
    if (madvise(map_base + s, a + t.width - s, MADV_POPULATE_READ) != 0)
      abort();
  }
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* path = argv[1];
  const int threads = atoi(argv[2]);
  const int shared_fd = open(path, O_RDONLY);
  const size_t fsize = lseek(shared_fd, 0, SEEK_END);
  std::vector<Tensor> ts;
  size_t layer = 4096ull * 8192 + 4096ull * 22016, off = 0;
  for (int l = 0; l < 32; ++l) {
    ts.push_back({off + 123 * 64, 8192, 1024, 4096});
    ts.push_back({off + 4096ull * 8192 + 64, 22016, 2752, 4096});
    off += layer;
  }
  if (off > fsize) {
    fprintf(stderr, "file too small (%zu < %zu)\n", fsize, off);
    return 2;
  }
  size_t total_bytes = 0, total_runs = 0;
  for (auto& t : ts) total_bytes += t.width * t.rows, total_runs += t.rows;
  const char* names[] = {"pread shared fd",
                         "pread own fd",
                         "io_uring own fd QD64",
                         "map per tensor+populate+munmap",
                         "one mapping, populate per tensor",
                         "one mapping, faults only",
                         "io_uring own fd QD256"};
  for (int rep = 0; rep < 2; ++rep) {
    for (int mode = 0; mode < 7; ++mode) {
      std::atomic<int> next{0};
      char* whole = nullptr;
      std::vector<std::vector<char>> dsts(threads);
      for (auto& d : dsts) d.assign(4096 * 2752 + 4096, 1);
      std::vector<int> fds(threads, shared_fd);
      if (mode == 1 || mode == 2 || mode == 6)
        for (auto& f : fds) f = open(path, O_RDONLY);
      auto t0 = Clock::now();
      if (mode == 4 || mode == 5) {
        whole =
            (char*)mmap(nullptr, fsize, PROT_READ, MAP_SHARED, shared_fd, 0);
        if (whole == MAP_FAILED) abort();
      }
      std::vector<std::thread> th;
      for (int w = 0; w < threads; ++w) {
        th.emplace_back([&, w] {
          char* dst = dsts[w].data();
          io_uring ring;
          const int qd = mode == 6 ? 256 : 64;
          if (mode == 2 || mode == 6) {
            if (io_uring_queue_init(qd, &ring, 0) != 0) abort();
            int f = fds[w];
            if (io_uring_register_files(&ring, &f, 1) != 0) abort();
          }
          for (int i; (i = next.fetch_add(1)) < (int)ts.size();) {
            const Tensor& t = ts[i];
            if (mode <= 1) {
              for (size_t r = 0; r < t.rows; ++r)
                if (pread(fds[w], dst + r * t.width, t.width,
                          t.offset + r * t.pitch) != (ssize_t)t.width)
                  abort();
            } else if (mode == 2 || mode == 6) {
              size_t r = 0, done = 0;
              while (done < t.rows) {
                int queued = 0;
                while (r < t.rows && queued < qd) {
                  io_uring_sqe* s = io_uring_get_sqe(&ring);
                  if (!s) break;
                  io_uring_prep_read(s, 0, dst + r * t.width, t.width,
                                     t.offset + r * t.pitch);
                  s->flags |= IOSQE_FIXED_FILE;
                  ++r, ++queued;
                }
                io_uring_submit_and_wait(&ring, queued);
                io_uring_cqe* c;
                unsigned head, n = 0;
                io_uring_for_each_cqe(&ring, head, c) {
                  if (c->res != (int)t.width) abort();
                  ++n;
                }
                io_uring_cq_advance(&ring, n);
                done += n;
              }
            } else if (mode == 3) {
              size_t start = t.offset / kPage * kPage;
              size_t len = t.offset + (t.rows - 1) * t.pitch + t.width - start;
              char* m = (char*)mmap(nullptr, len, PROT_READ, MAP_SHARED,
                                    shared_fd, start);
              if (m == MAP_FAILED) abort();
              PopulateRule(m, start, t);
              const char* s = m + (t.offset - start);
              for (size_t r = 0; r < t.rows; ++r)
                memcpy(dst + r * t.width, s + r * t.pitch, t.width);
              munmap(m, len);
            } else {
              if (mode == 4) PopulateRule(whole, 0, t);
              const char* s = whole + t.offset;
              for (size_t r = 0; r < t.rows; ++r)
                memcpy(dst + r * t.width, s + r * t.pitch, t.width);
            }
          }
          if (mode == 2 || mode == 6) io_uring_queue_exit(&ring);
        });
      }
      for (auto& x : th) x.join();
      auto t1 = Clock::now();
      double unmap_ms = 0;
      if (whole) {
        munmap(whole, fsize);
        unmap_ms = Ms(t1, Clock::now());
      }
      if (mode == 1 || mode == 2 || mode == 6)
        for (auto f : fds) close(f);
      const double ms = Ms(t0, t1);
      printf(
          "rep %d threads %2d %-34s %7.1f ms wall = %5.1f GB/s, %.2f us/run "
          "thread time",
          rep, threads, names[mode], ms, total_bytes / ms / 1e6,
          ms * 1e3 * threads / total_runs);
      if (whole) printf("; then munmap of the whole file %.1f ms", unmap_ms);
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
