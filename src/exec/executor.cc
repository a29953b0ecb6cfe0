#include "exec/executor.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "exec/read_chunk.h"
#include "util/progress.h"

namespace weightlift::internal {

StatusOr<std::unique_ptr<BouncePool>> BouncePool::Create(size_t total_bytes,
                                                         size_t slot_bytes) {
  slot_bytes = (std::max<size_t>(slot_bytes, 1) + 4095) / 4096 * 4096;
  const size_t slots = std::max<size_t>(1, total_bytes / slot_bytes);
  const size_t total = slots * slot_bytes;
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Status::ResourceExhausted(
        "cannot allocate " + std::to_string(total) +
        " bytes of staging memory: " + std::strerror(errno));
  }
  return std::unique_ptr<BouncePool>(new BouncePool(
      static_cast<std::byte*>(p), total, slot_bytes, static_cast<int>(slots)));
}

BouncePool::BouncePool(std::byte* base, size_t total, size_t slot, int slots)
    : base_(base), total_bytes_(total), slot_bytes_(slot), slots_(slots) {
  free_.reserve(slots);
  // Hand out low slots first (LIFO) so a small load touches few pages.
  for (int i = slots - 1; i >= 0; --i) free_.push_back(base_ + i * slot);
}

BouncePool::~BouncePool() { ::munmap(base_, total_bytes_); }

std::byte* BouncePool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !free_.empty(); });
  std::byte* s = free_.back();
  free_.pop_back();
  return s;
}

void BouncePool::Release(std::byte* slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(slot);
  }
  cv_.notify_one();
}

namespace {

std::string ChunkContext(const ReadChunk& c, const ExecCallbacks& cb) {
  std::string s = "loading ";
  if (cb.tensor_name && !c.scatters.empty()) {
    s += "tensor '" + cb.tensor_name(c.scatters.front().tensor) + "'";
    if (c.scatters.size() > 1) {
      s += " (and " + std::to_string(c.scatters.size() - 1) + " more)";
    }
  } else {
    s += "chunk";
  }
  s += " (" + std::string(c.is_direct() ? "direct" : "bounce") + " read)";
  return s;
}

// SC's bytes from the bounce SLOT to host memory: one memcpy, or one per
// row of a strided scatter (the rows land back to back).
void CopyOut(const std::byte* slot, const Scatter& sc) {
  auto* dst = reinterpret_cast<std::byte*>(sc.dst);
  const std::byte* src = slot + sc.chunk_offset;
  if (sc.rows <= 1) {
    std::memcpy(dst, src, sc.length);
    return;
  }
  for (uint64_t r = 0; r < sc.rows; ++r) {
    std::memcpy(dst + r * sc.length, src + r * sc.src_pitch, sc.length);
  }
}

}  // namespace

Status RunHostPlan(const Plan& plan, std::span<File* const> files,
                   ThreadPool& pool, BouncePool& bounce,
                   const ExecCallbacks& cb, ExecStats* stats) {
  if (plan.max_bounce_bytes > bounce.slot_bytes()) {
    return Status::Internal(
        "plan needs bounce chunks of " + std::to_string(plan.max_bounce_bytes) +
        " bytes but staging slots have " + std::to_string(bounce.slot_bytes()));
  }
  for (const ReadChunk& c : plan.chunks) {
    if (c.file >= files.size() || files[c.file] == nullptr) {
      return Status::Internal("plan reads file " + std::to_string(c.file) +
                              " which was not opened");
    }
  }
  const size_t num_tensors = plan.pieces_per_tensor.size();
  std::unique_ptr<std::atomic<uint32_t>[]> remaining(
      new std::atomic<uint32_t>[num_tensors]);
  for (size_t t = 0; t < num_tensors; ++t) {
    remaining[t].store(plan.pieces_per_tensor[t], std::memory_order_relaxed);
  }
  if (cb.on_ready) {
    for (size_t t = 0; t < num_tensors; ++t) {
      if (plan.pieces_per_tensor[t] == 0) cb.on_ready(static_cast<uint32_t>(t));
    }
  }

  const uint64_t total = plan.bytes_delivered;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> direct_chunks{0}, bounce_chunks{0};
  ProgressReporter progress(cb.on_progress, total,
                            ProgressReporter::kDefaultInterval);
  std::mutex error_mu;
  Status first_error;

  auto fail = [&](Status s) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.ok()) first_error = std::move(s);
    failed.store(true);
  };

  auto finish_scatters = [&](const ReadChunk& c) {
    uint64_t bytes = 0;
    for (const Scatter& s : c.scatters) {
      bytes += s.bytes();
      if (remaining[s.tensor].fetch_sub(1, std::memory_order_acq_rel) == 1 &&
          cb.on_ready) {
        cb.on_ready(s.tensor);
      }
    }
    progress.Add(bytes);
  };

  auto worker = [&](int) {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (cb.next_chunk != nullptr) {
        cb.next_chunk->store(i + 1, std::memory_order_relaxed);
      }
      if (i >= plan.chunks.size()) return;
      const ReadChunk& c = plan.chunks[i];
      File* f = files[c.file];
      if (c.is_direct()) {
        Status s =
            ReadChunkBytes(*f, c, reinterpret_cast<std::byte*>(c.direct_dst));
        if (!s.ok()) {
          fail(s.WithContext(ChunkContext(c, cb)));
          return;
        }
        direct_chunks.fetch_add(1, std::memory_order_relaxed);
      } else {
        std::byte* slot = bounce.Acquire();
        Status s = ReadChunkBytes(*f, c, slot);
        if (!s.ok()) {
          bounce.Release(slot);
          fail(s.WithContext(ChunkContext(c, cb)));
          return;
        }
        for (const Scatter& sc : c.scatters) CopyOut(slot, sc);
        bounce.Release(slot);
        bounce_chunks.fetch_add(1, std::memory_order_relaxed);
      }
      finish_scatters(c);
    }
  };

  const int usable =
      cb.threads > 0 ? std::min(cb.threads, pool.size()) : pool.size();
  const int threads = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(usable), plan.chunks.size()));
  if (threads > 0) pool.Run(worker, threads);
  if (stats != nullptr) {
    stats->bytes_read = plan.bytes_read;
    stats->bytes_delivered = progress.delivered();
    stats->direct_chunks = direct_chunks.load();
    stats->bounce_chunks = bounce_chunks.load();
    stats->threads = threads;
  }
  if (failed.load()) return first_error;
  progress.Finish();
  return Status::OK();
}

}  // namespace weightlift::internal
