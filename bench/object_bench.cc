#include "object_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "env/env.h"
#include "util/thread_count.h"
#include "weightlift/loader.h"

namespace weightlift::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

// Reads every byte of FILES with THREADS threads, CHUNK bytes per read, into
// one reused buffer per thread. Returns the seconds taken.
StatusOr<double> FetchAll(
    const std::vector<std::unique_ptr<internal::File>>& files, int threads,
    size_t chunk) {
  struct Piece {
    internal::File* file;
    uint64_t offset;
    size_t length;
  };
  std::vector<Piece> pieces;
  for (const auto& f : files) {
    for (uint64_t off = 0; off < f->size(); off += chunk) {
      pieces.push_back(
          {f.get(), off,
           static_cast<size_t>(std::min<uint64_t>(chunk, f->size() - off))});
    }
  }
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::vector<std::byte> buf(chunk);
      for (size_t i; (i = next.fetch_add(1)) < pieces.size();) {
        const Piece& p = pieces[i];
        Status s = p.file->ReadAt(p.offset, std::span(buf).first(p.length));
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (first.ok()) first = s;
          next = pieces.size();
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  const double s = Seconds(t0);
  WL_RETURN_IF_ERROR(first);
  return s;
}

}  // namespace

StatusOr<BenchReport> RunObjectBench(const std::string& path,
                                     const Checkpoint& ckpt,
                                     const BenchOptions& options) {
  BenchReport r;
  r.path = path;
  r.device = options.load.device;
  r.files = ckpt.files().size();
  r.tensors = ckpt.tensors().size();
  r.bytes = ckpt.total_bytes();
  r.repeat = options.repeat;

  WL_ASSIGN_OR_RETURN(internal::Env * env, internal::EnvForLocation(path));
  std::vector<std::unique_ptr<internal::File>> files;
  uint64_t file_bytes = 0;
  for (const FileInfo& f : ckpt.files()) {
    WL_ASSIGN_OR_RETURN(auto file, env->OpenForRead(f.path, Backend::kPread));
    file_bytes += file->size();
    files.push_back(std::move(file));
  }
  WL_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader,
                      Loader::Create(options.load));
  const int threads = internal::ThreadCount(
      options.load.threads, internal::ThreadUse::kBufferedReads);

  Measurement loader_row{
      kLoader, "loader: Load() from object storage", Mode::kCold, {}, 0, {}};
  loader_row.bytes = r.bytes;
  Measurement ceiling{kStorageCeiling,
                      "ceiling: ranged GETs of every byte, " +
                          std::to_string(threads) + " threads x " +
                          std::to_string(options.load.chunk_bytes >> 20) +
                          " MiB, into reused buffers",
                      Mode::kCold,
                      {},
                      0,
                      {}};
  ceiling.bytes = file_bytes;
  ceiling.method = "File::ReadAt on the object-storage transport";
  for (int pass = 0; pass < options.repeat; ++pass) {
    const std::string n =
        " " + std::to_string(pass + 1) + "/" + std::to_string(options.repeat);
    if (options.on_step) options.on_step("network ceiling" + n);
    WL_ASSIGN_OR_RETURN(double s,
                        FetchAll(files, threads, options.load.chunk_bytes));
    ceiling.seconds.push_back(s);
    if (options.on_step) options.on_step("loader" + n);
    const auto t0 = std::chrono::steady_clock::now();
    WL_ASSIGN_OR_RETURN(LoadResult result, loader->Load(ckpt));
    loader_row.seconds.push_back(Seconds(t0));
    r.cold_report = result.report;
    r.have_cold_report = true;
  }
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) {
    r.peak_rss_after_loader = r.peak_rss_end =
        static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  }
  r.rows.push_back(std::move(loader_row));
  r.rows.push_back(std::move(ceiling));
  r.notes.push_back(
      "object storage: every pass fetches every byte over the network, so "
      "both rows are in the cold column");
  return r;
}

}  // namespace weightlift::bench
