#include "cuda/registered_pages.h"

#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <system_error>
#include <utility>

#include "cuda/cuda_util.h"
#include "util/clock.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace weightlift::internal {

RegisteredPages::RegisteredPages(int device, uint64_t made_for)
    : device_(device), made_for_(made_for), work_(std::make_shared<Work>()) {
  work_->device = device;
}

std::shared_ptr<RegisteredPages> RegisteredPages::Start(
    int device, std::vector<RegisterFile> files, uint64_t made_for,
    std::string left_out) {
  std::shared_ptr<RegisteredPages> p(new RegisteredPages(device, made_for));
  p->left_out_ = std::move(left_out);
  for (RegisterFile& f : files) {
    p->work_->files.push_back(FileState{std::move(f), 0, {}});
  }
  try {
    p->thread_ = std::thread([w = p->work_] { Register(*w); });
  } catch (const std::system_error& e) {
    for (FileState& fs : p->work_->files) {
      fs.error =
          std::string("no thread to register its pages (") + e.what() + ")";
    }
    p->work_->finished = true;
  }
  return p;
}

void RegisteredPages::Register(Work& w) {
  const auto t = Clock::now();
  Status device = UseDevice(w.device);
  for (FileState& fs : w.files) {
    if (!device.ok()) {
      fs.error = "cuda:" + std::to_string(w.device) + " cannot register " +
                 fs.f.path + ": " + device.message();
      continue;
    }
    for (; fs.done < fs.f.spans.size(); ++fs.done) {
      if (w.stop.load(std::memory_order_relaxed)) break;
      const PageSpan& s = fs.f.spans[fs.done];
      // MAP the span's offsets: the mapping starts at file offset 0.
      std::byte* base = fs.f.map.data() + s.begin;
      // Fault the pages in first (a page-table walk over cached pages);
      // registering then only pins them. Best effort: without
      // MADV_POPULATE_READ (kernels before 5.14) registering faults them.
      (void)madvise(base, s.bytes(), MADV_POPULATE_READ);
      const cudaError_t e =
          cudaHostRegister(base, s.bytes(), cudaHostRegisterReadOnly);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fs.error =
            CudaStatus(e, "cudaHostRegister(ReadOnly) of " +
                              std::to_string(s.bytes()) + " bytes at offset " +
                              std::to_string(s.begin) + " of " + fs.f.path)
                .message();
        break;
      }
    }
  }
  w.seconds = SecondsSince(t);
  w.finished = true;
}

RegisteredPages::~RegisteredPages() {
  if (made_.forked()) {
    // The thread and its work stayed in the parent (fork_epoch.h).
    if (thread_.joinable()) AbandonThread(std::move(thread_));
    Abandon(std::move(work_));
    return;
  }
  Stop();
  Unregister();
}

std::shared_ptr<RegisteredPages> RegisteredPages::Declined(int device,
                                                           uint64_t made_for,
                                                           std::string why) {
  std::shared_ptr<RegisteredPages> p(new RegisteredPages(device, made_for));
  p->work_->finished = true;
  p->declined_ = std::move(why);
  return p;
}

void RegisteredPages::Stop() {
  // In a forked child the thread is the parent's: nothing to join here.
  if (made_.forked()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  work_->stop = true;
  if (thread_.joinable()) thread_.join();
}

void RegisteredPages::Wait() {
  if (made_.forked()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) thread_.join();
}

void RegisteredPages::Unregister() {
  // On the registering device, giving the thread back its context after
  // (ScopedDevice: never making one on GPU 0 for a rank on another GPU).
  ScopedDevice on(device_);
  if (on.error() != cudaSuccess) {
    // The pages may still be registered: unmapping them would leave
    // registrations over addresses a later mmap may reuse. Keep them.
    (void)cudaGetLastError();
    Abandon(std::move(work_));
    return;
  }
  for (FileState& fs : work_->files) {
    for (size_t i = 0; i < fs.done; ++i) {
      (void)cudaHostUnregister(fs.f.map.data() + fs.f.spans[i].begin);
    }
    fs.done = 0;
  }
  (void)cudaGetLastError();
  // The mappings go with work_.
}

const RegisteredPages::FileState* RegisteredPages::Find(uint32_t file) const {
  for (const FileState& fs : work_->files) {
    if (fs.f.file == file) return &fs;
  }
  return nullptr;
}

const Mapping* RegisteredPages::InPlace(const TensorSelection& sel) const {
  const FileState* fs = Find(sel.file);
  if (fs == nullptr) return nullptr;
  return SpansHold(RegisteredSpans(*fs), sel.file, std::span(&sel, 1))
             ? &fs->f.map
             : nullptr;
}

const Mapping* RegisteredPages::FileMapping(uint32_t file) const {
  const FileState* fs = Find(file);
  return fs != nullptr && fs->done > 0 ? &fs->f.map : nullptr;
}

std::string RegisteredPages::Shortfall(uint32_t file) const {
  const FileState* fs = Find(file);
  if (fs == nullptr) return "";
  if (!fs->error.empty()) {
    return "prepare could not register all its pages: " + fs->error;
  }
  if (fs->done < fs->f.spans.size()) {
    return "prepare had registered " + std::to_string(fs->done) + " of its " +
           std::to_string(fs->f.spans.size()) +
           " page spans when the load began";
  }
  return "";
}

uint64_t RegisteredPages::bytes() const {
  uint64_t n = 0;
  for (const FileState& fs : work_->files) n += SpanBytes(fs.f.spans);
  return n;
}

std::span<const PageSpan> RegisteredPages::RegisteredSpans(
    const FileState& fs) {
  return std::span<const PageSpan>(fs.f.spans).first(fs.done);
}

uint64_t RegisteredPages::registered_bytes() const {
  uint64_t n = 0;
  for (const FileState& fs : work_->files) n += SpanBytes(RegisteredSpans(fs));
  return n;
}

uint64_t RegisteredPages::registered_file_bytes(uint32_t file) const {
  const FileState* fs = Find(file);
  return fs == nullptr ? 0 : SpanBytes(RegisteredSpans(*fs));
}

double RegisteredPages::seconds() const { return work_->seconds; }

}  // namespace weightlift::internal
