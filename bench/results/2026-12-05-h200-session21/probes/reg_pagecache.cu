// Probe (session 21): could a tensor-parallel rank's load be DMA straight
// out of the page cache, with the registration done ahead (in prepare)
// rather than on the clock? Session 2's host-register path lost because it
// registered on the clock (about 48 ms per GB); the DMA itself ran at the
// ceiling. What this measures, on a file already in the page cache:
//
//   one:  pinned ceiling (one 2 GiB copy, 4 MiB copies); populate and
//         register 2 GiB of the file's mapping (timed); from it: one copy,
//         4 / 16 MiB copies, and 2D copies shaped as a rank of 8's
//         row-parallel parts (1024 B of each 8192 B row: o_proj; 2752 of
//         22016: down_proj), against the same 2D copies out of pinned
//         memory; unregister (timed).
//   rank OFF LEN READY GO: populate + register [OFF, OFF+LEN) (timed),
//         touch READY, wait for GO, copy it to the device in 8 MiB copies,
//         print the start and end times (CLOCK_REALTIME) for an aggregate
//         over n such processes at once.
//
//   nvcc -O2 -std=c++17 -o reg_pagecache reg_pagecache.cu
//   ./reg_pagecache one FILE
//   ./reg_pagecache rank FILE OFF LEN READY GO
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define CK(x)                                                          \
  do {                                                                 \
    cudaError_t e_ = (x);                                              \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
static double wall_s() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Best of 3: 1D copies of PIECE bytes covering LEN bytes from SRC.
static double copy_gbps(char* dst, const char* src, size_t len, size_t piece,
                        cudaStream_t s) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaStreamSynchronize(s));
    double t0 = now_ms();
    for (size_t o = 0; o < len; o += piece)
      CK(cudaMemcpyAsync(dst + o, src + o, std::min(piece, len - o),
                         cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    best = std::min(best, now_ms() - t0);
  }
  return len / best / 1e6;
}

// Best of 3: 2D copies, WIDTH bytes of each PITCH-byte row, ROWS_PER_COPY
// rows a copy, over LEN bytes of SRC. Returns delivered GB/s.
static double copy2d_gbps(char* dst, const char* src, size_t len, size_t width,
                          size_t pitch, size_t rows_per_copy, cudaStream_t s) {
  const size_t rows = len / pitch;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaStreamSynchronize(s));
    double t0 = now_ms();
    for (size_t r = 0; r < rows; r += rows_per_copy) {
      size_t h = std::min(rows_per_copy, rows - r);
      CK(cudaMemcpy2DAsync(dst + r * width, width, src + r * pitch, pitch,
                           width, h, cudaMemcpyHostToDevice, s));
    }
    CK(cudaStreamSynchronize(s));
    best = std::min(best, now_ms() - t0);
  }
  return rows * width / best / 1e6;
}

static char* map_file(const char* path, size_t* size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    std::perror(path);
    std::exit(1);
  }
  struct stat st;
  fstat(fd, &st);
  *size = st.st_size;
  void* p = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  close(fd);
  return static_cast<char*>(p);
}

// Populate and register [BASE, BASE+LEN); prints the times.
static void register_range(char* base, size_t len, const char* label) {
  double t0 = now_ms();
  int rc = madvise(base, len, MADV_POPULATE_READ);
  double t1 = now_ms();
  CK(cudaHostRegister(base, len, cudaHostRegisterReadOnly));
  double t2 = now_ms();
  std::printf("%s: populate %.1f ms (rc %d), register %.1f ms for %.2f GB "
              "(%.1f ms/GB together)\n",
              label, t1 - t0, rc, t2 - t1, len / 1e9,
              (t2 - t0) / (len / 1e9));
}

static int one(const char* path) {
  const size_t len = size_t(2) << 30;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char* dev;
  CK(cudaMalloc(&dev, len));
  char* pinned;
  CK(cudaMallocHost(&pinned, len));
  std::memset(pinned, 1, len);
  std::printf("pinned: one copy %.1f GB/s, 4 MiB copies %.1f, 16 MiB %.1f\n",
              copy_gbps(dev, pinned, len, len, s),
              copy_gbps(dev, pinned, len, 4 << 20, s),
              copy_gbps(dev, pinned, len, 16 << 20, s));
  size_t size;
  char* map = map_file(path, &size);
  if (size < len + (size_t(1) << 30)) {
    std::fprintf(stderr, "file too small\n");
    return 1;
  }
  char* base = map + (size_t(1) << 30);  // away from the header
  register_range(base, len, "page cache 2 GiB");
  std::printf("registered page cache: one copy %.1f GB/s, 4 MiB copies "
              "%.1f, 16 MiB %.1f\n",
              copy_gbps(dev, base, len, len, s),
              copy_gbps(dev, base, len, 4 << 20, s),
              copy_gbps(dev, base, len, 16 << 20, s));
  struct Shape {
    size_t width, pitch;
    const char* name;
  } shapes[] = {{1024, 8192, "o_proj 1/8 (1024 of 8192 B rows)"},
                {2752, 22016, "down_proj 1/8 (2752 of 22016 B rows)"},
                {2048, 8192, "o_proj 1/4 (2048 of 8192 B rows)"}};
  for (const Shape& sh : shapes) {
    // One copy per part (4096 rows), as one tensor's rows: per copy.
    size_t rows_per_copy = 4096;
    std::printf("2D %s, %zu rows a copy: registered page cache %.1f GB/s, "
                "pinned %.1f GB/s (delivered)\n",
                sh.name, rows_per_copy,
                copy2d_gbps(dev, base, len, sh.width, sh.pitch, rows_per_copy,
                            s),
                copy2d_gbps(dev, pinned, len, sh.width, sh.pitch,
                            rows_per_copy, s));
  }
  // Call D found a rank's strided copies slower inside a load than here.
  // A checkpoint's rows start wherever its header ends (8-byte aligned):
  // the same 2D copies from sources off a 64 / 256 / 4096-byte boundary.
  for (size_t off : {size_t(0), size_t(104), size_t(192), size_t(448),
                     size_t(3520)}) {
    std::printf("2D o_proj 1/8 at source offset %zu (mod 256: %zu): "
                "registered page cache %.1f GB/s, pinned %.1f GB/s; down_proj "
                "1/8 %.1f / %.1f\n",
                off, off % 256,
                copy2d_gbps(dev, base + off, len - 4096, 1024, 8192, 4096, s),
                copy2d_gbps(dev, pinned + off, len - 4096, 1024, 8192, 4096,
                            s),
                copy2d_gbps(dev, base + off, len - 32768, 2752, 22016, 4096,
                            s),
                copy2d_gbps(dev, pinned + off, len - 32768, 2752, 22016, 4096,
                            s));
  }
  // Call E: best of 3 hides a first copy's costs. A load copies each part
  // once, just after its pages were registered: first copies (each 2D and
  // 1D shape on a freshly registered range of its own) against later ones.
  {
    char* fresh = map + (size_t(3) << 30);  // 3-4 GiB: base is 1-3 GiB
    const size_t flen = size_t(1) << 30;
    if (size >= (size_t(4) << 30)) {
      register_range(fresh, flen, "fresh 1 GiB");
      const size_t q = flen / 4;
      auto once2d = [&](char* src, size_t len) {
        CK(cudaStreamSynchronize(s));
        double t = now_ms();
        for (size_t r = 0; r < len / 8192; r += 4096)
          CK(cudaMemcpy2DAsync(dev + r * 1024, 1024, src + r * 8192, 8192,
                               1024, std::min<size_t>(4096, len / 8192 - r),
                               cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
        return (len / 8) / (now_ms() - t) / 1e6;
      };
      auto once1d = [&](char* src, size_t len) {
        CK(cudaStreamSynchronize(s));
        double t = now_ms();
        for (size_t o = 0; o < len; o += 4 << 20)
          CK(cudaMemcpyAsync(dev + o, src + o, 4 << 20,
                             cudaMemcpyHostToDevice, s));
        CK(cudaStreamSynchronize(s));
        return len / (now_ms() - t) / 1e6;
      };
      double a1 = once2d(fresh, q), a2 = once2d(fresh, q);
      double b1 = once1d(fresh + q, q), b2 = once1d(fresh + q, q);
      std::printf("first copies of fresh registered pages: 2D o_proj 1/8 "
                  "%.1f GB/s (again %.1f); 1D 4 MiB copies %.1f (again "
                  "%.1f)\n", a1, a2, b1, b2);
      // Does touching each page once ahead (a 2D copy of 4 bytes per 4 KiB
      // page, as prepare could after registering) make the later first
      // copy fast, and does it last 200 ms? The second half of the range
      // has not been copied from yet.
      char* warm = fresh + 2 * q;
      char* scratch;
      CK(cudaMalloc(&scratch, q / 4096 * 4));
      CK(cudaStreamSynchronize(s));
      double tw = now_ms();
      CK(cudaMemcpy2DAsync(scratch, 4, warm, 4096, 4, q / 4096,
                           cudaMemcpyHostToDevice, s));
      CK(cudaStreamSynchronize(s));
      const double warm_ms = now_ms() - tw;
      usleep(200000);
      double c1 = once2d(warm, q);
      double d1 = once2d(fresh + 3 * q, q);  // never touched: the control
      std::printf("touching each page of 256 MiB ahead took %.2f ms; 200 ms "
                  "later the first 2D copy ran at %.1f GB/s (untouched "
                  "pages: %.1f)\n", warm_ms, c1, d1);
      CK(cudaFree(scratch));
      CK(cudaHostUnregister(fresh));
    }
  }
  double t0 = now_ms();
  CK(cudaHostUnregister(base));
  std::printf("unregister %.1f ms\n", now_ms() - t0);
  return 0;
}

static int rank(const char* path, size_t off, size_t len, const char* ready,
                const char* go) {
  cudaStream_t s;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char* dev;
  CK(cudaMalloc(&dev, len));
  CK(cudaMemset(dev, 0, len));
  size_t size;
  char* map = map_file(path, &size);
  len = std::min(len, size - off);
  off &= ~size_t(4095);
  char* base = map + off;
  double w0 = wall_s();
  register_range(base, len, "rank range");
  double w1 = wall_s();
  close(open(ready, O_CREAT | O_WRONLY, 0644));
  while (access(go, F_OK) != 0) usleep(200);
  double t0 = wall_s();
  const size_t piece = 8 << 20;
  for (size_t o = 0; o < len; o += piece)
    CK(cudaMemcpyAsync(dev + o, base + o, std::min(piece, len - o),
                       cudaMemcpyHostToDevice, s));
  CK(cudaStreamSynchronize(s));
  double t1 = wall_s();
  std::printf("RANK reg_start %.6f reg_end %.6f t0 %.6f t1 %.6f bytes %zu "
              "gbps %.2f\n",
              w0, w1, t0, t1, len, len / (t1 - t0) / 1e9);
  CK(cudaHostUnregister(base));
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "one") return one(argv[2]);
  if (argc >= 7 && std::string(argv[1]) == "rank")
    return rank(argv[2], std::strtoull(argv[3], nullptr, 10),
                std::strtoull(argv[4], nullptr, 10), argv[5], argv[6]);
  std::fprintf(stderr, "usage: see the top of reg_pagecache.cu\n");
  return 2;
}
