#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
using C = std::chrono::steady_clock;
static std::byte* ring;
static size_t per;
static void touch(int i) { std::memset(ring + i * per, 0, per); }
static void* tramp(void* a) {
  touch((int)(intptr_t)a);
  return nullptr;
}
int main(int argc, char** argv) {
  int n = 16;
  per = (argc > 2 ? atoi(argv[2]) : 8) << 20;
  bool custom = argv[1][0] == 'c';
  size_t bytes = per * n + (2 << 20);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(m, bytes, MADV_HUGEPAGE);
  ring =
      (std::byte*)(((uintptr_t)m + (2 << 20) - 1) & ~uintptr_t((2 << 20) - 1));
  auto t0 = C::now();
  std::vector<pthread_t> th(n);
  size_t ss = 8 << 20;
  std::byte* stacks = nullptr;
  if (custom) {
    stacks = (std::byte*)mmap(
        nullptr, ss * n, PROT_READ | PROT_WRITE,
        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    for (int i = 0; i < n; i++) mprotect(stacks + i * ss, 4096, PROT_NONE);
  }
  auto t1 = C::now();
  for (int i = 0; i < n; i++) {
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (custom) pthread_attr_setstack(&at, stacks + i * ss, ss);
    pthread_create(&th[i], &at, tramp, (void*)(intptr_t)i);
    pthread_attr_destroy(&at);
  }
  auto t2 = C::now();
  for (auto& t : th) pthread_join(t, nullptr);
  auto t3 = C::now();
  printf("%s stacks %.3f ms, create %.3f ms, all touched %.3f ms\n",
         custom ? "custom" : "glibc",
         std::chrono::duration<double, std::milli>(t1 - t0).count(),
         std::chrono::duration<double, std::milli>(t2 - t1).count(),
         std::chrono::duration<double, std::milli>(t3 - t1).count());
}
