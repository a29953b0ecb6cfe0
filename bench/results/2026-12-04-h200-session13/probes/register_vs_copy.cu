// Probe (session 13): does cudaHostRegister on one thread hold up
// cudaMemcpyAsync calls (their enqueue, or the copies) on another? The first
// load registers the staging ring's second wave while the first copies out
// of the first wave are under way.
//
//   nvcc -O2 -std=c++17 -o register_vs_copy register_vs_copy.cu && ./register_vs_copy
//
// Thread B copies 4 MiB pinned -> device in a loop (enqueue, then
// synchronize), timing both. Thread A, meanwhile, first-writes 48 MiB of
// fresh memory and registers it. Printed: A's registration time, and B's
// copies that overlapped it against B's copies before it.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#define CK(x)                                                         \
  do {                                                                \
    cudaError_t e = (x);                                              \
    if (e != cudaSuccess) {                                           \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));             \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  const size_t kCopy = 4u << 20, kReg = 48u << 20;
  void* src = nullptr;
  void* dst = nullptr;
  CK(cudaHostAlloc(&src, kCopy, cudaHostAllocDefault));
  std::memset(src, 1, kCopy);
  CK(cudaMalloc(&dst, 64u << 20));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 10; ++i) {
    cudaMemcpyAsync(dst, src, kCopy, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
  }
  for (int round = 0; round < 4; ++round) {
    struct Rec { double t0, t_enq, t_done; };
    std::vector<Rec> recs;
    recs.reserve(20000);
    std::atomic<bool> stop{false};
    double reg_start = 0, reg_end = 0, touch_start = 0;
    std::thread b([&] {
      while (!stop.load()) {
        Rec r;
        r.t0 = now_ms();
        cudaMemcpyAsync(dst, src, kCopy, cudaMemcpyHostToDevice, s);
        r.t_enq = now_ms();
        cudaStreamSynchronize(s);
        r.t_done = now_ms();
        recs.push_back(r);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    void* ring = mmap(nullptr, kReg, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    touch_start = now_ms();
    std::memset(ring, 0, kReg);
    reg_start = now_ms();
    cudaError_t e = cudaHostRegister(ring, kReg, cudaHostRegisterDefault);
    reg_end = now_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop = true;
    b.join();
    auto summarize = [&](const char* what, double lo, double hi) {
      std::vector<double> enq, lat;
      for (const Rec& r : recs) {
        if (r.t_done < lo || r.t0 > hi) continue;
        enq.push_back(r.t_enq - r.t0);
        lat.push_back(r.t_done - r.t0);
      }
      if (lat.empty()) {
        std::printf("  %s: no copies\n", what);
        return;
      }
      std::sort(enq.begin(), enq.end());
      std::sort(lat.begin(), lat.end());
      std::printf("  %s: %zu copies, enqueue median %.3f max %.3f ms, "
                  "copy+sync median %.3f max %.3f ms\n",
                  what, lat.size(), enq[enq.size() / 2], enq.back(),
                  lat[lat.size() / 2], lat.back());
    };
    std::printf("round %d: touch 48 MiB %.2f ms, cudaHostRegister %.2f ms (%s)\n",
                round, reg_start - touch_start, reg_end - reg_start,
                cudaGetErrorString(e));
    summarize("before (5 ms)", touch_start - 5, touch_start);
    summarize("during touch", touch_start, reg_start);
    summarize("during register", reg_start, reg_end);
    summarize("after", reg_end, reg_end + 5);
    cudaHostUnregister(ring);
    munmap(ring, kReg);
  }
  return 0;
}
