#include "exec/populator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

namespace weightlift::internal {
namespace {
constexpr uintptr_t kPage = 4096;
}

Populator::Populator(const Plan& plan, std::atomic<size_t>* next_chunk)
    : plan_(plan), next_chunk_(next_chunk) {
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    refused_ = e.code().value();  // readers fault pages in themselves
  }
}

int Populator::Finish() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  return refused_;
}

void Populator::Loop() {
  constexpr uintptr_t kPiece = uintptr_t{4} << 20;
  for (size_t i = 0; i < plan_.chunks.size(); ++i) {
    // Chunks the workers already took are being written by them.
    i = std::max(i, next_chunk_->load(std::memory_order_relaxed));
    if (i >= plan_.chunks.size()) return;
    const ReadChunk& c = plan_.chunks[i];
    for (const Scatter& sc : c.scatters) {
      const uintptr_t lo = sc.dst / kPage * kPage;
      const uintptr_t hi = (sc.dst + sc.bytes() + kPage - 1) / kPage * kPage;
      for (uintptr_t p = lo; p < hi; p += kPiece) {
        if (stop_.load(std::memory_order_relaxed)) return;
        if (::madvise(reinterpret_cast<void*>(p), std::min(kPiece, hi - p),
                      MADV_POPULATE_WRITE) != 0 &&
            errno != EINTR && errno != EAGAIN) {
          refused_ = errno;
          return;
        }
      }
    }
  }
}

}  // namespace weightlift::internal
