// What pinning a 128 MiB staging ring costs, by method (session 8 probe):
// touch + cudaHostRegister in 32 parts of 4 MiB (one thread; 16 threads),
// one 128 MiB registration, cudaHostAlloc in parts and whole, and the
// teardown of each. Memory is 2 MiB-aligned anonymous with MADV_HUGEPAGE,
// as PinnedBuffer::Reserve makes it.
//
//   nvcc -O2 -std=c++20 pin_probe.cc -o pin_probe -lpthread && ./pin_probe
#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;
static double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
static const size_t kRing = 128u << 20, kPart = 4u << 20, kParts = 32;

static char* Anon(bool huge) {
  size_t len = kRing + (2u << 20);
  char* m = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) abort();
  char* p = m + ((2u << 20) - (uintptr_t)m % (2u << 20)) % (2u << 20);
  if (huge) madvise(p, kRing, MADV_HUGEPAGE);
  return p;
}
static void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    printf("%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

int main() {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(thp, s);
  printf("THP: %s\n", s.c_str());
  auto t = Clock::now();
  Check(cudaFree(0), "ctx");
  printf("context %.1f ms\n", Ms(t, Clock::now()));
  for (int rep = 0; rep < 2; ++rep) {
    for (int huge = 1; huge >= 0; --huge) {
      // A: parts, one thread
      char* p = Anon(huge);
      double touch = 0, reg = 0;
      for (size_t i = 0; i < kParts; ++i) {
        auto a = Clock::now();
        memset(p + i * kPart, 0, kPart);
        auto b = Clock::now();
        Check(cudaHostRegister(p + i * kPart, kPart, 0), "reg");
        auto c = Clock::now();
        touch += Ms(a, b), reg += Ms(b, c);
      }
      t = Clock::now();
      for (size_t i = 0; i < kParts; ++i) cudaHostUnregister(p + i * kPart);
      printf(
          "rep %d huge %d: 32x4MiB one thread: touch %.1f ms, register %.1f ms "
          "(%.2f per part), unregister %.1f ms\n",
          rep, huge, touch, reg, reg / kParts, Ms(t, Clock::now()));
      // B: parts, 16 threads (2 parts each)
      p = Anon(huge);
      t = Clock::now();
      std::vector<std::thread> th;
      std::vector<double> done(16);
      for (int w = 0; w < 16; ++w)
        th.emplace_back([&, w] {
          cudaFree(0);
          for (int k = 0; k < 2; ++k) {
            char* q = p + (w * 2 + k) * kPart;
            memset(q, 0, kPart);
            Check(cudaHostRegister(q, kPart, 0), "reg16");
          }
          done[w] = Ms(t, Clock::now());
        });
      for (auto& x : th) x.join();
      double first = 1e9, last = 0;
      for (double d : done)
        first = std::min(first, d), last = std::max(last, d);
      printf(
          "rep %d huge %d: 32x4MiB 16 threads: first thread done %.1f ms, all "
          "%.1f ms\n",
          rep, huge, first, last);
      // C: one registration of 128 MiB
      p = Anon(huge);
      t = Clock::now();
      memset(p, 0, kRing);
      auto b = Clock::now();
      Check(cudaHostRegister(p, kRing, 0), "reg1");
      auto c = Clock::now();
      cudaHostUnregister(p);
      printf(
          "rep %d huge %d: one 128MiB: touch %.1f ms, register %.1f ms, "
          "unregister %.1f ms\n",
          rep, huge, Ms(t, b), Ms(b, c), Ms(c, Clock::now()));
      // C2: 16 threads touch in parallel, then one registration
      p = Anon(huge);
      t = Clock::now();
      th.clear();
      for (int w = 0; w < 16; ++w)
        th.emplace_back(
            [&, w] { memset(p + w * (kRing / 16), 0, kRing / 16); });
      for (auto& x : th) x.join();
      b = Clock::now();
      Check(cudaHostRegister(p, kRing, 0), "reg1b");
      c = Clock::now();
      cudaHostUnregister(p);
      printf(
          "rep %d huge %d: 16-thread touch %.1f ms then one 128MiB register "
          "%.1f ms\n",
          rep, huge, Ms(t, b), Ms(b, c));
    }
    // D: cudaHostAlloc
    std::vector<void*> ptrs(kParts);
    t = Clock::now();
    for (auto& q : ptrs) Check(cudaHostAlloc(&q, kPart, 0), "alloc");
    auto b = Clock::now();
    for (auto q : ptrs) cudaFreeHost(q);
    printf("rep %d: cudaHostAlloc 32x4MiB %.1f ms, free %.1f ms\n", rep,
           Ms(t, b), Ms(b, Clock::now()));
    void* big;
    t = Clock::now();
    Check(cudaHostAlloc(&big, kRing, 0), "allocbig");
    b = Clock::now();
    memset(big, 1, kRing);
    auto c = Clock::now();
    cudaFreeHost(big);
    printf(
        "rep %d: cudaHostAlloc 128MiB %.1f ms, first write %.1f ms, free %.1f "
        "ms\n",
        rep, Ms(t, b), Ms(b, c), Ms(c, Clock::now()));
    t = Clock::now();
    Check(cudaHostAlloc(&big, kRing, cudaHostAllocWriteCombined), "wc");
    b = Clock::now();
    cudaFreeHost(big);
    printf("rep %d: cudaHostAlloc 128MiB write-combined %.1f ms\n", rep,
           Ms(t, b));
  }
  return 0;
}
