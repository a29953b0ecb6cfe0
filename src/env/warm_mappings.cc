#include "env/warm_mappings.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "env/mapped_rows_file.h"
#include "util/clock.h"

namespace weightlift::internal {
namespace {

// Rows filled between two looks at the stop flag: a load that takes a
// mapping waits at most this many rows' populate (about 0.1-0.3 ms).
constexpr uint64_t kRowsPerLook = 256;

}  // namespace

WarmMappings::~WarmMappings() {
  if (made_.forked()) {
    // The fillers stayed in the parent, and so did what they were reading
    // (mu_ may even be locked by a parent thread): left as it is.
    AbandonThreads(std::move(fillers_));
    Abandon(std::shared_ptr<void>(std::move(filling_)));
    return;
  }
  Release();
}

void WarmMappings::StopLocked() {
  filling_->stop.store(true, std::memory_order_release);
  JoinLocked();
}

void WarmMappings::JoinLocked() {
  for (std::thread& t : fillers_) t.join();
  fillers_.clear();
}

void WarmMappings::Start(std::vector<WarmFile> files) {
  if (made_.forked()) return;
  std::lock_guard<std::mutex> lock(mu_);
  StopLocked();
  for (auto& e : filling_->entries) {
    if (!e->taken) e->file.map.ResetInBackground();
  }
  filling_->entries.clear();
  for (WarmFile& f : files) {
    auto e = std::make_unique<Entry>();
    e->file = std::move(f);
    filling_->entries.push_back(std::move(e));
  }
  filling_->stop.store(false, std::memory_order_release);
  filling_->next.store(0, std::memory_order_relaxed);
  const size_t threads = std::min<size_t>(filling_->entries.size(),
                                          static_cast<size_t>(kFillThreads));
  for (size_t k = 0; k < threads; ++k) {
    try {
      fillers_.emplace_back([f = filling_.get()] { Fill(*f); });
    } catch (const std::system_error&) {
      // Fewer threads, or none: the mappings are still whole-file mappings
      // a load can take; its copies take the faults, as without prepare.
      break;
    }
  }
}

void WarmMappings::Fill(Filling& f) {
  // F.entries is not resized while these threads run (Start, Take and
  // Release join them first), and each entry's mapping stays put until
  // then; each entry is filled by the one thread that took it.
  for (size_t k; (k = f.next.fetch_add(1, std::memory_order_relaxed)) <
                 f.entries.size();) {
    if (f.stop.load(std::memory_order_acquire)) return;
    FillFile(f, *f.entries[k]);
  }
}

void WarmMappings::FillFile(const Filling& f, Entry& e) {
  const auto t0 = Clock::now();
  for (const RowRuns& r : e.file.runs) {
    for (uint64_t row = 0; row < r.rows; row += kRowsPerLook) {
      if (f.stop.load(std::memory_order_acquire)) break;
      const uint64_t n = std::min(kRowsPerLook, r.rows - row);
      const int err = PopulateRuns(e.file.map, 0, r.offset + row * r.pitch,
                                   r.pitch, r.width, n);
      if (err != 0) {
        e.error.store(err, std::memory_order_relaxed);
        break;
      }
      e.filled.fetch_add(n, std::memory_order_relaxed);
    }
    if (f.stop.load(std::memory_order_acquire) ||
        e.error.load(std::memory_order_relaxed) != 0) {
      break;
    }
  }
  e.seconds = SecondsSince(t0);
}

std::optional<WarmMapping> WarmMappings::Take(uint32_t file) {
  if (made_.forked()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& e : filling_->entries) {
    if (e->file.file != file || e->taken) continue;
    StopLocked();
    e->taken = true;
    WarmMapping out;
    out.map = std::move(e->file.map);
    out.runs_filled = e->filled.load(std::memory_order_relaxed);
    for (const RowRuns& r : e->file.runs) out.runs_total += r.rows;
    out.fill_seconds = e->seconds;
    out.error = e->error.load(std::memory_order_relaxed);
    return out;
  }
  return std::nullopt;
}

void WarmMappings::Release() {
  if (made_.forked()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (filling_->entries.empty()) return;
  StopLocked();
  for (auto& e : filling_->entries) {
    if (!e->taken) e->file.map.ResetInBackground();
  }
  filling_->entries.clear();
}

void WarmMappings::Wait() {
  if (made_.forked()) return;
  std::lock_guard<std::mutex> lock(mu_);
  JoinLocked();
}

bool WarmMappings::Holds(uint32_t file) const {
  if (made_.forked()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : filling_->entries) {
    if (e->file.file == file && !e->taken) return true;
  }
  return false;
}

}  // namespace weightlift::internal
