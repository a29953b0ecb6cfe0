#include "exec/executor.h"

#include <algorithm>

#include "exec/read_chunk.h"

namespace weightlift::internal {
namespace {

// "loading tensor 'x' (and N more) (direct read)"; with FILE (for a
// sink's own errors, which do not name it) "... from PATH ...".
std::string ChunkContext(const ReadChunk& c, const RunOptions& o,
                         const File* file = nullptr) {
  std::string s = "loading ";
  if (o.tensor_name && !c.scatters.empty()) {
    s += "tensor '" + o.tensor_name(c.scatters.front().tensor) + "'";
    if (c.scatters.size() > 1) {
      s += " (and " + std::to_string(c.scatters.size() - 1) + " more)";
    }
  } else {
    s += "chunk";
  }
  if (file != nullptr) s += " from " + file->path();
  s += " (" + std::string(c.is_direct() ? "direct" : "bounce") + " read)";
  return s;
}

}  // namespace

Status Sink::ReadDirect(int, File& file, const ReadChunk& c) {
  return ReadChunkBytes(file, c, reinterpret_cast<std::byte*>(c.direct_dst));
}

void RunPlan(const Plan& plan, std::span<File* const> files, Sink& sink,
             ThreadPool& pool, const RunOptions& options,
             CompletionTracker& done, ExecStats* stats) {
  if (plan.max_bounce_bytes > sink.slot_bytes()) {
    return done.Fail(Status::Internal("plan needs bounce chunks of " +
                                      std::to_string(plan.max_bounce_bytes) +
                                      " bytes but the sink's slots hold " +
                                      std::to_string(sink.slot_bytes())));
  }
  for (const ReadChunk& c : plan.chunks) {
    if (c.file >= files.size() || files[c.file] == nullptr) {
      return done.Fail(Status::Internal("plan reads file " +
                                        std::to_string(c.file) +
                                        " which was not opened"));
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> direct_total{0}, bounce_total{0};

  auto worker = [&](int w) {
    uint64_t direct = 0, bounce = 0;
    if (Status s = sink.BeginWorker(w); !s.ok()) {
      done.Fail(std::move(s));
    }
    while (!done.failed()) {
      if (options.cancel != nullptr &&
          options.cancel->load(std::memory_order_relaxed)) {
        done.Fail(Status::Cancelled("the load was cancelled by its caller"));
        break;
      }
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (options.next_chunk != nullptr) {
        options.next_chunk->store(i + 1, std::memory_order_relaxed);
      }
      if (i >= plan.chunks.size()) break;
      const ReadChunk& c = plan.chunks[i];
      File& f = *files[c.file];
      if (c.is_direct()) {
        Status s = sink.ReadDirect(w, f, c);
        if (!s.ok()) {
          done.Fail(s.WithContext(ChunkContext(c, options)));
          break;
        }
        ++direct;
        done.Delivered(c);
        continue;
      }
      StatusOr<SinkSlot> slot = sink.AcquireSlot(w, c, done);
      if (!slot.ok()) {
        done.Fail(slot.status().WithContext(ChunkContext(c, options, &f)));
        break;
      }
      if (!slot->filled) {
        Status s = ReadChunkBytes(f, c, slot->data);
        if (!s.ok()) {
          sink.Abandon(w, *slot);
          done.Fail(s.WithContext(ChunkContext(c, options)));
          break;
        }
      }
      Status s = sink.Deliver(w, c, *slot, done);
      if (!s.ok()) {
        done.Fail(s.WithContext(ChunkContext(c, options, &f)));
        break;
      }
      ++bounce;
    }
    sink.Drain(w, done);
    direct_total.fetch_add(direct, std::memory_order_relaxed);
    bounce_total.fetch_add(bounce, std::memory_order_relaxed);
  };

  const int usable = options.threads > 0
                         ? std::min(options.threads, pool.size())
                         : pool.size();
  const int threads = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(usable), plan.chunks.size()));
  if (threads > 0) pool.Run(worker, threads);
  if (stats != nullptr) {
    stats->direct_chunks += direct_total.load();
    stats->bounce_chunks += bounce_total.load();
    stats->threads = std::max(stats->threads, threads);
  }
}

}  // namespace weightlift::internal
