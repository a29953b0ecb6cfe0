#include "exec/executor.h"

#include <algorithm>
#include <cstdio>
#include <vector>

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
  s += c.in_place
           ? std::string(" (in place)")
           : " (" + std::string(c.is_direct() ? "direct" : "bounce") + " read)";
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
  // Each worker's own timeline, merged after the run.
  struct Times {
    double read = 0, wait = 0, deliver = 0, drain = 0;
    double first_delivery = -1, last_read_end = -1, drained = -1;
  };
  // The clock is read around every phase whether or not STATS wants the
  // timeline (four reads a chunk, next to a read of 256 KiB or more); only
  // the offsets from stats->start need a start, and stay -1 without one.
  const bool has_start =
      stats != nullptr && stats->start != Clock::time_point{};
  const auto since = [&](Clock::time_point t) {
    return has_start ? Seconds(t - stats->start) : -1.0;
  };
  const auto secs = [](Clock::time_point a, Clock::time_point b) {
    return Seconds(b - a);
  };
  std::vector<Times> times(static_cast<size_t>(std::max(pool.size(), 1)));

  auto worker = [&](int w) {
    uint64_t direct = 0, bounce = 0;
    Times& tm = times[static_cast<size_t>(w)];
    const auto delivered_at = [&tm](double t) {
      if (tm.first_delivery < 0) tm.first_delivery = t;
    };
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
        const Clock::time_point read_start = Clock::now();
        Status s = sink.ReadDirect(w, f, c);
        if (!s.ok()) {
          done.Fail(s.WithContext(ChunkContext(c, options)));
          break;
        }
        const Clock::time_point read_end = Clock::now();
        tm.read += secs(read_start, read_end);
        tm.last_read_end = since(read_end);
        delivered_at(tm.last_read_end);
        ++direct;
        done.Delivered(c);
        continue;
      }
      const Clock::time_point wait_start = Clock::now();
      StatusOr<SinkSlot> slot = sink.AcquireSlot(w, c, done);
      if (!slot.ok()) {
        done.Fail(slot.status().WithContext(ChunkContext(c, options, &f)));
        break;
      }
      const Clock::time_point read_start = Clock::now();
      tm.wait += secs(wait_start, read_start);
      if (!slot->filled) {
        Status s = ReadChunkBytes(f, c, slot->data);
        if (!s.ok()) {
          sink.Abandon(w, *slot);
          done.Fail(s.WithContext(ChunkContext(c, options)));
          break;
        }
      }
      const Clock::time_point read_end = Clock::now();
      tm.read += secs(read_start, read_end);
      tm.last_read_end = since(read_end);
      Status s = sink.Deliver(w, c, *slot, done);
      if (!s.ok()) {
        done.Fail(s.WithContext(ChunkContext(c, options, &f)));
        break;
      }
      const Clock::time_point delivered = Clock::now();
      tm.deliver += secs(read_end, delivered);
      delivered_at(since(delivered));
      ++bounce;
    }
    const Clock::time_point drain_start = Clock::now();
    sink.Drain(w, done);
    const Clock::time_point drain_end = Clock::now();
    tm.drain += secs(drain_start, drain_end);
    tm.drained = since(drain_end);
    direct_total.fetch_add(direct, std::memory_order_relaxed);
    bounce_total.fetch_add(bounce, std::memory_order_relaxed);
  };

  const int usable = options.threads > 0
                         ? std::min(options.threads, pool.size())
                         : pool.size();
  const int threads = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(usable), plan.chunks.size()));
  if (threads > 0) {
    if (Status s = pool.Run(worker, threads); !s.ok()) return done.Fail(s);
  }
  if (stats != nullptr) {
    stats->direct_chunks += direct_total.load();
    stats->bounce_chunks += bounce_total.load();
    stats->threads = std::max(stats->threads, threads);
    for (const Times& tm : times) {
      stats->read_seconds += tm.read;
      stats->slot_wait_seconds += tm.wait;
      stats->deliver_seconds += tm.deliver;
      stats->drain_seconds += tm.drain;
      if (tm.first_delivery >= 0 && (stats->first_delivery < 0 ||
                                     tm.first_delivery < stats->first_delivery))
        stats->first_delivery = tm.first_delivery;
      stats->last_read_end = std::max(stats->last_read_end, tm.last_read_end);
      stats->drained = std::max(stats->drained, tm.drained);
    }
  }
}

std::string TimelineNote(const ExecStats& st) {
  if (st.direct_chunks + st.bounce_chunks == 0 || st.drained < 0) return {};
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "executor: %d workers' time: reading %.1f ms, waiting for a "
                "free slot %.1f ms, delivering %.1f ms, draining %.1f ms; "
                "first chunk delivered at %.2f ms, last read done at %.2f "
                "ms, all drained at %.2f ms",
                st.threads, st.read_seconds * 1e3, st.slot_wait_seconds * 1e3,
                st.deliver_seconds * 1e3, st.drain_seconds * 1e3,
                st.first_delivery * 1e3, st.last_read_end * 1e3,
                st.drained * 1e3);
  return buf;
}

}  // namespace weightlift::internal
