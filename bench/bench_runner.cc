#include "bench_runner.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "baselines.h"
#include "device_baselines.h"
#include "util/thread_count.h"
#include "weightlift/byte_size.h"
#include "weightlift/loader.h"

namespace weightlift::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Rows measured once and shown under both cold and warm.
bool IsAnyMode(const std::string& id) {
  return id == kPinnedCopy || id == kFreshMemory;
}

uint64_t PeakRss() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

std::string Gbps(double v) {
  if (v <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string Times(double v) {
  if (v <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

// Byte counts as every report prints them (binary units).
std::string Bytes(uint64_t b) { return FormatByteSize(b); }

// Collects samples into rows keyed by (id, mode).
class Rows {
 public:
  explicit Rows(std::vector<Measurement>* rows) : rows_(rows) {}
  void Add(const std::string& id, const std::string& label, Mode mode,
           uint64_t bytes, double seconds, const std::string& method) {
    for (Measurement& m : *rows_) {
      if (m.id == id && m.mode == mode) {
        m.seconds.push_back(seconds);
        m.method = method;
        return;
      }
    }
    Measurement m;
    m.id = id;
    m.label = label;
    m.mode = mode;
    m.bytes = bytes;
    m.method = method;
    m.seconds.push_back(seconds);
    rows_->push_back(std::move(m));
  }

 private:
  std::vector<Measurement>* rows_;
};

// The distinct paths a load's files took, in file order: "uring, pread".
std::string PathsTaken(const LoadReport& r) {
  std::string out;
  for (const FileReport& f : r.files) {
    if (out.find(f.path_taken) == std::string::npos) {
      out += (out.empty() ? "" : ", ") + f.path_taken;
    }
  }
  return out;
}

// The loader's count for buffered reads (the page-cache ceiling's job).
int CeilingThreads(const LoadOptions& o) {
  return internal::ThreadCount(o.threads, internal::ThreadUse::kBufferedReads);
}

}  // namespace

const char* ModeName(Mode m) { return m == Mode::kCold ? "cold" : "warm"; }

double Measurement::median_gbps() const {
  if (seconds.empty()) return 0;
  std::vector<double> s = seconds;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  const double med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return med > 0 ? static_cast<double>(bytes) / med / 1e9 : 0;
}

double Measurement::best_gbps() const {
  if (seconds.empty()) return 0;
  const double best = *std::min_element(seconds.begin(), seconds.end());
  return best > 0 ? static_cast<double>(bytes) / best / 1e9 : 0;
}

const Measurement* BenchReport::Find(const std::string& id, Mode mode) const {
  for (const Measurement& m : rows) {
    if (m.id == id && (m.mode == mode || IsAnyMode(id))) return &m;
  }
  return nullptr;
}

double BenchReport::RatioOf(const std::string& num, const std::string& den,
                            Mode mode) const {
  const Measurement* a = Find(num, mode);
  const Measurement* b = Find(den, mode);
  if (a == nullptr || b == nullptr) return 0;
  const double d = b->median_gbps();
  return d > 0 ? a->median_gbps() / d : 0;
}

double BenchReport::Ratio(const std::string& id, Mode mode) const {
  return RatioOf(kLoader, id, mode);
}

StatusOr<BenchReport> RunBench(const std::string& path, const Checkpoint& ckpt,
                               const BenchOptions& options) {
  if (options.repeat < 1) {
    return Status::InvalidArgument("--repeat must be >= 1, got " +
                                   std::to_string(options.repeat));
  }
  const Device device = options.load.device;
  BenchReport report;
  report.path = path;
  report.device = device;
  report.files = ckpt.files().size();
  report.tensors = ckpt.tensors().size();
  report.bytes = ckpt.total_bytes();
  report.repeat = options.repeat;
  Rows rows(&report.rows);

  WL_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader,
                      Loader::Create(options.load));
  const std::string loader_label = "weightlift loader -> " + device.ToString();
  const std::string naive_mmap_label =
      device.is_cuda() ? "naive: mmap + cudaMemcpy per tensor"
                       : "naive: mmap + copy per tensor";
  const std::string naive_pread_label = "naive: 1 thread pread per tensor";

  auto step = [&](Mode mode, int pass, const char* what) {
    if (options.on_step) {
      options.on_step(std::string(ModeName(mode)) + " " +
                      std::to_string(pass + 1) + "/" +
                      std::to_string(options.repeat) + ": " + what);
    }
  };
  auto evict = [&]() -> Status {
    WL_ASSIGN_OR_RETURN(double resident, EvictCheckpoint(ckpt));
    report.max_resident_after_evict =
        std::max(report.max_resident_after_evict, resident);
    return Status::OK();
  };
  // Host: destinations the bench allocates and touches once (on the first
  // LoadInto step, after the loader's first pass so its peak RSS stays its
  // own), outside every timer, so LoadInto() and the sequential read pay no
  // first touch.
  AnonymousMemory touched;
  // Set once the bench has held checkpoint-sized memory of its own (the
  // touched buffer, the sequential read's buffers, a naive baseline's
  // tensors or mapping): the RSS high-water mark includes it from then on,
  // so the loader's figure is taken only before.
  bool bench_held_memory = false;
  std::vector<Destination> dests;
  const bool into = !device.is_cuda() && options.into_touched;
  // The bench is about to hold a checkpoint-sized copy of its own: the
  // touched buffer is given back first, so it never holds two (it is
  // touched again, outside the timers, when next needed).
  auto hold_own_copy = [&] {
    touched = AnonymousMemory();
    dests.clear();
    bench_held_memory = true;
  };
  auto ensure_touched = [&]() -> Status {
    if (touched.data() != nullptr) return Status::OK();
    hold_own_copy();
    // The tensors one after another, each 64-byte aligned; the buffer also
    // holds the whole files for the sequential read into it.
    std::vector<uint64_t> offsets;
    uint64_t layout = 0;
    for (const TensorInfo& t : ckpt.tensors()) {
      layout = (layout + 63) / 64 * 64;
      offsets.push_back(layout);
      layout += t.size;
    }
    uint64_t file_bytes = 0;
    for (const FileInfo& f : ckpt.files()) file_bytes += f.size;
    WL_ASSIGN_OR_RETURN(touched,
                        AnonymousMemory::Map(std::max(file_bytes, layout),
                                             "bench: touched host memory"));
    std::memset(touched.data(), 0, touched.size());  // every page faulted in
    for (size_t i = 0; i < offsets.size(); ++i) {
      const TensorInfo& t = ckpt.tensors()[i];
      dests.push_back({t.name, touched.data() + offsets[i], t.size});
    }
    return Status::OK();
  };
  auto run_loader = [&](Mode mode) -> Status {
    LoadCallbacks callbacks;
    callbacks.on_progress = options.on_progress;
    const auto start = Clock::now();
    StatusOr<LoadResult> result = loader->Load(ckpt, {}, callbacks);
    const double secs =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (!result.ok()) return result.status().WithContext("loader");
    if (result->report.bytes != ckpt.total_bytes()) {
      return Status::Internal(
          "loader delivered " + std::to_string(result->report.bytes) +
          " bytes of " + std::to_string(ckpt.total_bytes()));
    }
    rows.Add(kLoader, loader_label, mode, ckpt.total_bytes(), secs,
             PathsTaken(result->report));
    if (mode == Mode::kCold) {
      report.cold_report = result->report;
      report.have_cold_report = true;
    } else {
      report.warm_report = result->report;
      report.have_warm_report = true;
    }
    result = Status::Cancelled("released");  // free before the next step
    // Only until the bench's own touched buffer exists: after that the
    // high-water mark is the bench's, not the loader's.
    if (!bench_held_memory) {
      report.peak_rss_after_loader =
          std::max(report.peak_rss_after_loader, PeakRss());
    }
    return Status::OK();
  };
  auto run_loader_into = [&](Mode mode) -> Status {
    WL_RETURN_IF_ERROR(ensure_touched());
    LoadReport rep;
    const auto start = Clock::now();
    Status s = loader->LoadInto(ckpt, dests, &rep);
    const double secs =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (!s.ok()) return s.WithContext("loader (LoadInto)");
    rows.Add(kLoaderInto, "weightlift LoadInto -> touched host memory", mode,
             ckpt.total_bytes(), secs, PathsTaken(rep));
    return Status::OK();
  };
  auto run_naive_mmap = [&](Mode mode) -> Status {
    hold_own_copy();  // it holds every tensor at once
    if (device.is_cuda()) {
      WL_ASSIGN_OR_RETURN(double secs, NaiveMmapToDevice(ckpt, device.index));
      rows.Add(kNaiveMmap, naive_mmap_label, mode, ckpt.total_bytes(), secs,
               "mmap + synchronous cudaMemcpy per tensor from the mapping");
    } else {
      WL_ASSIGN_OR_RETURN(Timing t, NaiveMmapCopy(ckpt));
      rows.Add(kNaiveMmap, naive_mmap_label, mode, t.bytes, t.seconds,
               t.method);
    }
    return Status::OK();
  };
  auto run_naive_pread = [&](Mode mode) -> Status {
    hold_own_copy();
    WL_ASSIGN_OR_RETURN(Timing t, NaivePreadOneThread(ckpt));
    rows.Add(kNaivePread, naive_pread_label, mode, t.bytes, t.seconds,
             t.method + " (into host memory)");
    return Status::OK();
  };

  for (int pass = 0; pass < options.repeat; ++pass) {
    if (options.cold) {
      const Mode m = Mode::kCold;
      step(m, pass, "weightlift loader");
      WL_RETURN_IF_ERROR(evict());
      WL_RETURN_IF_ERROR(run_loader(m));
      if (options.ceilings) {
        step(m, pass, "storage ceiling (O_DIRECT)");
        WL_RETURN_IF_ERROR(evict());
        // A file system that refuses O_DIRECT has no storage ceiling to
        // show; say so and keep measuring the rest.
        StatusOr<Timing> t = StorageCeiling(ckpt);
        if (t.ok()) {
          rows.Add(kStorageCeiling, "storage ceiling: raw O_DIRECT read", m,
                   t->bytes, t->seconds, t->method);
        } else if (pass == 0) {
          report.notes.push_back("storage ceiling skipped: " +
                                 t.status().ToString());
        }
      }
      if (into) {
        step(m, pass, "weightlift LoadInto (touched memory)");
        WL_RETURN_IF_ERROR(evict());
        WL_RETURN_IF_ERROR(run_loader_into(m));
      }
      step(m, pass, "naive mmap + copy");
      WL_RETURN_IF_ERROR(evict());
      WL_RETURN_IF_ERROR(run_naive_mmap(m));
      if (options.naive_pread) {
        step(m, pass, "naive pread");
        WL_RETURN_IF_ERROR(evict());
        WL_RETURN_IF_ERROR(run_naive_pread(m));
      }
    }
    if (options.warm) {
      const Mode m = Mode::kWarm;
      step(m, pass, "warming the page cache");
      WL_RETURN_IF_ERROR(WarmCheckpoint(ckpt));
      if (options.ceilings) {
        step(m, pass, "page-cache ceiling (buffered read)");
        const int threads = CeilingThreads(options.load);
        WL_ASSIGN_OR_RETURN(Timing t, PageCacheCeiling(ckpt, threads));
        rows.Add(kPageCacheCeiling, "page-cache ceiling: buffered read", m,
                 t.bytes, t.seconds, t.method);
      }
      step(m, pass, "weightlift loader");
      WL_RETURN_IF_ERROR(run_loader(m));
      if (!device.is_cuda() && options.ceilings) {
        // Right after the loader, in the same page-cache state: the same
        // job (files into new memory) done the plain way.
        step(m, pass, "sequential read into fresh memory");
        hold_own_copy();
        WL_ASSIGN_OR_RETURN(Timing t, SequentialReadFresh(ckpt));
        rows.Add(kSequentialFresh, "buffered sequential read into fresh memory",
                 m, t.bytes, t.seconds, t.method);
      }
      if (into) {
        step(m, pass, "weightlift LoadInto (touched memory)");
        WL_RETURN_IF_ERROR(run_loader_into(m));
        if (options.ceilings) {
          step(m, pass, "sequential read into touched memory");
          WL_ASSIGN_OR_RETURN(Timing t, SequentialReadInto(ckpt, touched.data(),
                                                           touched.size()));
          rows.Add(kSequentialInto,
                   "buffered sequential read into touched memory", m, t.bytes,
                   t.seconds, t.method);
        }
      }
      step(m, pass, "naive mmap + copy");
      WL_RETURN_IF_ERROR(run_naive_mmap(m));
      if (options.naive_pread) {
        step(m, pass, "naive pread");
        WL_RETURN_IF_ERROR(run_naive_pread(m));
      }
      WL_ASSIGN_OR_RETURN(double resident, ResidentFraction(ckpt));
      if (resident < 0.9) {
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "warm pass %d: only %.0f%% of the files' pages were "
                      "still resident at its end (memory pressure?)",
                      pass + 1, resident * 100);
        report.notes.push_back(buf);
      }
    }
    if (!device.is_cuda() && options.ceilings) {
      // Every loader that returns new host memory pays the first touch of
      // it; on a VM that backs guest memory lazily this hop can be slower
      // than storage, so it is a ceiling of its own.
      step(Mode::kWarm, pass, "fresh host memory");
      WL_ASSIGN_OR_RETURN(Timing t, FreshMemoryCeiling(ckpt.total_bytes()));
      rows.Add(kFreshMemory, "fresh host memory ceiling: first touch",
               Mode::kCold, t.bytes, t.seconds, t.method);
    }
    if (device.is_cuda() && options.ceilings) {
      step(Mode::kWarm, pass, "pinned host->device copy");
      const uint64_t bytes =
          std::clamp<uint64_t>(ckpt.total_bytes(), 64ull << 20, 1ull << 30);
      WL_ASSIGN_OR_RETURN(double gbps,
                          MeasurePinnedCopyGBps(device.index, bytes));
      const double secs =
          gbps > 0 ? static_cast<double>(bytes) / gbps / 1e9 : 0;
      rows.Add(kPinnedCopy, "pinned host->device copy ceiling", Mode::kCold,
               bytes, secs, "cudaMemcpyAsync from pinned host memory");
    }
  }
  if (options.cold && report.max_resident_after_evict > 0.1) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "eviction did not take: up to %.0f%% of the pages stayed "
                  "resident (tmpfs or pages mapped elsewhere), so the cold "
                  "numbers are not cold reads",
                  report.max_resident_after_evict * 100);
    report.notes.push_back(buf);
  }
  report.peak_rss_end = PeakRss();
  return report;
}

std::string BenchReport::ToTable() const {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "weightlift bench: %s\n  %llu file%s, %llu tensors, %s -> %s; "
                "%d pass%s, median GB/s (best in --json)\n\n",
                path.c_str(), static_cast<unsigned long long>(files),
                files == 1 ? "" : "s", static_cast<unsigned long long>(tensors),
                Bytes(bytes).c_str(), device.ToString().c_str(), repeat,
                repeat == 1 ? "" : "es");
  out += line;

  // Rows in a fixed order, cold and warm side by side.
  struct Spec {
    const char* id;
  };
  const Spec order[] = {{kLoader},          {kLoaderInto},
                        {kStorageCeiling},  {kPageCacheCeiling},
                        {kSequentialFresh}, {kSequentialInto},
                        {kFreshMemory},     {kNaiveMmap},
                        {kNaivePread},      {kPinnedCopy}};
  // Wide enough for the measurement labels and the ratio labels below.
  size_t label_w = 40;
  for (const Measurement& m : rows) label_w = std::max(label_w, m.label.size());
  std::snprintf(line, sizeof line, "  %-*s  %10s  %10s\n", int(label_w), "",
                "cold GB/s", "warm GB/s");
  out += line;
  for (const Spec& s : order) {
    const Measurement* any = nullptr;
    for (const Measurement& m : rows) {
      if (m.id == s.id) any = &m;
    }
    if (any == nullptr) continue;
    const Measurement* cold = Find(s.id, Mode::kCold);
    const Measurement* warm = Find(s.id, Mode::kWarm);
    std::snprintf(line, sizeof line, "  %-*s  %10s  %10s\n", int(label_w),
                  any->label.c_str(),
                  Gbps(cold ? cold->median_gbps() : 0).c_str(),
                  Gbps(warm ? warm->median_gbps() : 0).c_str());
    out += line;
  }

  out += "\n";
  struct RatioSpec {
    const char* label;
    const char* cold_id;
    const char* warm_id;
  };
  const RatioSpec ratios[] = {
      {"loader / ceiling (storage | page cache)", kStorageCeiling,
       kPageCacheCeiling},
      {"loader / naive mmap + copy", kNaiveMmap, kNaiveMmap},
      {"loader / naive pread", kNaivePread, kNaivePread},
      {"loader / sequential read into fresh memory", kSequentialFresh,
       kSequentialFresh},
      {"loader / fresh host memory ceiling", kFreshMemory, kFreshMemory},
      {"loader / pinned host->device ceiling", kPinnedCopy, kPinnedCopy},
  };
  std::snprintf(line, sizeof line, "  %-*s  %10s  %10s\n", int(label_w),
                "ratios", "cold", "warm");
  out += line;
  for (const RatioSpec& r : ratios) {
    const double c = Ratio(r.cold_id, Mode::kCold);
    const double w = Ratio(r.warm_id, Mode::kWarm);
    if (c <= 0 && w <= 0) continue;
    std::snprintf(line, sizeof line, "  %-*s  %10s  %10s\n", int(label_w),
                  r.label, Times(c).c_str(), Times(w).c_str());
    out += line;
  }
  {
    const double c = RatioOf(kLoaderInto, kStorageCeiling, Mode::kCold);
    const double w = RatioOf(kLoaderInto, kSequentialInto, Mode::kWarm);
    if (c > 0 || w > 0) {
      std::snprintf(line, sizeof line, "  %-*s  %10s  %10s\n", int(label_w),
                    "LoadInto / (storage | sequential read)", Times(c).c_str(),
                    Times(w).c_str());
      out += line;
    }
  }

  auto paths = [&](const char* mode, const LoadReport& r) {
    std::snprintf(line, sizeof line, "\nloader paths (%s):\n", mode);
    out += line;
    for (const FileReport& f : r.files) {
      out += "  " + f.path + ": " + f.path_taken;
      if (!f.reason.empty()) out += " (" + f.reason + ")";
      out += "\n";
    }
    for (const std::string& n : r.notes) out += "  note: " + n + "\n";
  };
  if (have_cold_report) paths("cold", cold_report);
  if (have_warm_report) paths("warm", warm_report);

  out += "\nmethods:\n";
  for (const Measurement& m : rows) {
    if (m.id == kLoader) continue;
    if (m.mode == Mode::kWarm && Find(m.id, Mode::kCold) != nullptr &&
        !IsAnyMode(m.id)) {
      continue;  // same method as the cold row
    }
    out += "  " + m.label + ": " + m.method + "\n";
  }
  std::snprintf(line, sizeof line,
                "\npeak RSS (getrusage): %s after the loader runs, %s at the "
                "end (naive baselines hold every tensor at once)\n",
                Bytes(peak_rss_after_loader).c_str(),
                Bytes(peak_rss_end).c_str());
  out += line;
  for (const std::string& n : notes) out += "note: " + n + "\n";
  return out;
}

std::string BenchReport::ToJson() const {
  using Json = nlohmann::ordered_json;
  Json out;
  out["path"] = path;
  out["device"] = device.ToString();
  out["files"] = files;
  out["tensors"] = tensors;
  out["bytes"] = bytes;
  out["repeat"] = repeat;
  Json jrows = Json::array();
  for (const Measurement& m : rows) {
    Json j;
    j["id"] = m.id;
    j["label"] = m.label;
    j["mode"] = IsAnyMode(m.id) ? "any" : ModeName(m.mode);
    j["method"] = m.method;
    j["bytes"] = m.bytes;
    j["seconds"] = m.seconds;
    j["median_gbps"] = m.median_gbps();
    j["best_gbps"] = m.best_gbps();
    jrows.push_back(std::move(j));
  }
  out["rows"] = std::move(jrows);
  Json ratios = Json::object();
  for (Mode mode : {Mode::kCold, Mode::kWarm}) {
    Json r = Json::object();
    const char* ceiling =
        mode == Mode::kCold ? kStorageCeiling : kPageCacheCeiling;
    if (double v = Ratio(ceiling, mode); v > 0) r["ceiling"] = v;
    for (const char* id : {kNaiveMmap, kNaivePread, kPinnedCopy, kFreshMemory,
                           kSequentialFresh}) {
      if (double v = Ratio(id, mode); v > 0) r[id] = v;
    }
    // LoadInto() against its own references (storage | read into touched).
    const char* into_ref =
        mode == Mode::kCold ? kStorageCeiling : kSequentialInto;
    if (double v = RatioOf(kLoaderInto, into_ref, mode); v > 0) {
      r["loader_into_touched_over_its_reference"] = v;
    }
    ratios[ModeName(mode)] = std::move(r);
  }
  out["ratios"] = std::move(ratios);
  Json reports = Json::object();
  auto add_report = [&](const char* key, const LoadReport& r) {
    Json j = Json::parse(r.ToJson(), nullptr, false);
    reports[key] = j.is_discarded() ? Json(r.ToJson()) : j;
  };
  if (have_cold_report) add_report("cold", cold_report);
  if (have_warm_report) add_report("warm", warm_report);
  out["loader_reports"] = std::move(reports);
  out["max_resident_after_evict"] = max_resident_after_evict;
  out["peak_rss_after_loader_bytes"] = peak_rss_after_loader;
  out["peak_rss_end_bytes"] = peak_rss_end;
  out["notes"] = notes;
  return out.dump(2, ' ', false, Json::error_handler_t::replace);
}

}  // namespace weightlift::bench
