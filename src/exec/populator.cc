#include "exec/populator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack it
#endif

namespace weightlift::internal {
namespace {
constexpr uintptr_t kPage = 4096;
constexpr uintptr_t kPiece = uintptr_t{4} << 20;
constexpr uint64_t kMinFreshBytes = uint64_t{1} << 20;
}  // namespace

Populator::Populator(const Plan& plan, std::atomic<size_t>* next_chunk,
                     int threads)
    : next_chunk_(next_chunk) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    for (const Scatter& sc : plan.chunks[i].scatters) {
      const uintptr_t lo = sc.dst / kPage * kPage;
      const uintptr_t hi = (sc.dst + sc.bytes() + kPage - 1) / kPage * kPage;
      for (uintptr_t p = lo; p < hi; p += kPiece) {
        pieces_.push_back(Piece{p, std::min(p + kPiece, hi), i});
      }
    }
  }
  threads = std::max(threads, 1);
  for (int t = 0; t < threads; ++t) {
    try {
      threads_.emplace_back([this] { Loop(); });
    } catch (const std::system_error&) {
      break;  // fewer populating threads; readers fault the rest themselves
    }
  }
}

bool MostlyFresh(std::span<const uintptr_t> dsts,
                 std::span<const uint64_t> sizes) {
  constexpr uint64_t kSamples = 64;
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  // Below a few hundred pages a populating thread costs about what the
  // readers' own faults do, and the samples would cost as much again (a
  // safe_open read of one small tensor passes here).
  if (total < kMinFreshBytes) return false;
  const uint64_t step = std::max<uint64_t>(total / kSamples, kPage);
  uint64_t sampled = 0, resident = 0;
  uint64_t at = 0;  // bytes before destination k
  for (size_t k = 0; k < dsts.size() && k < sizes.size(); ++k) {
    // The samples at multiples of STEP that fall in this destination.
    for (uint64_t x = (at + step - 1) / step * step; x < at + sizes[k];
         x += step) {
      const uintptr_t page = (dsts[k] + (x - at)) / kPage * kPage;
      unsigned char in_core = 0;
      if (::mincore(reinterpret_cast<void*>(page), kPage, &in_core) != 0) {
        return false;
      }
      ++sampled;
      resident += in_core & 1;
    }
    at += sizes[k];
  }
  return sampled > 0 && 2 * resident < sampled;
}

int Populator::DefaultThreads() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw / 8, 1, 4);
}

int Populator::Finish() {
  stop_.store(true, std::memory_order_relaxed);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  return refused_.load(std::memory_order_relaxed);
}

void Populator::Loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const size_t k = next_piece_.fetch_add(1, std::memory_order_relaxed);
    if (k >= pieces_.size()) return;
    const Piece& pc = pieces_[k];
    // Chunks the workers already took are being written by them (and
    // faulted in by their reads).
    if (pc.chunk < next_chunk_->load(std::memory_order_relaxed)) continue;
    if (::madvise(reinterpret_cast<void*>(pc.lo), pc.hi - pc.lo,
                  MADV_POPULATE_WRITE) != 0 &&
        errno != EINTR && errno != EAGAIN) {
      refused_.store(errno, std::memory_order_relaxed);
      stop_.store(true, std::memory_order_relaxed);
      return;
    }
  }
}

}  // namespace weightlift::internal
