#include "exec/rows_prefaulter.h"

#include <algorithm>
#include <system_error>

namespace weightlift::internal {

int RowsPrefaulter::SpareThreads(unsigned hardware_threads, int sharing,
                                 int workers) {
  const int share =
      static_cast<int>(hardware_threads) / std::max(sharing, 1);
  return std::clamp(share - workers - 1, 0, 4);
}

bool RowsPrefaulter::Wanted(const Plan& plan) {
  return std::any_of(plan.chunks.begin(), plan.chunks.end(),
                     [](const ReadChunk& c) { return c.rows > 1; });
}

RowsPrefaulter::RowsPrefaulter(const Plan& plan, std::span<File* const> files,
                               std::atomic<size_t>* next_chunk, int threads)
    : plan_(plan), files_(files), next_chunk_(next_chunk) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ReadChunk& c = plan.chunks[i];
    if (c.rows > 1 && c.file < files.size() && files[c.file] != nullptr) {
      row_chunks_.push_back(i);
    }
  }
  if (row_chunks_.empty()) return;
  threads = std::max(threads, 1);
  for (int t = 0; t < threads; ++t) {
    try {
      threads_.emplace_back([this] { Loop(); });
    } catch (const std::system_error&) {
      break;  // fewer threads; the readers fault the rest themselves
    }
  }
}

size_t RowsPrefaulter::Finish() {
  stop_.store(true, std::memory_order_relaxed);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  return done_.load(std::memory_order_relaxed);
}

void RowsPrefaulter::Loop() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const size_t k = cursor_.fetch_add(1, std::memory_order_relaxed);
    if (k >= row_chunks_.size()) return;
    const size_t i = row_chunks_[k];
    // A chunk a worker already took is being read: too late to help.
    if (i < next_chunk_->load(std::memory_order_relaxed)) continue;
    const ReadChunk& c = plan_.chunks[i];
    if (files_[c.file]->PrefaultRows(c.offset, c.pitch, c.length / c.rows,
                                     c.rows)) {
      done_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace weightlift::internal
