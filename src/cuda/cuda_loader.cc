// The CUDA loader. Three ways bytes reach device memory, chosen per file:
//
//  pinned staging  storage --ReadAt--> pinned slot --cudaMemcpyAsync--> device.
//                  A ring of pinned slots is allocated once per loader and
//                  split evenly over the worker threads; each thread reads a
//                  chunk into its next free slot, enqueues the copies on its
//                  stream and records the slot's event, so reads of later
//                  chunks overlap the copies of earlier ones. A slot is reused
//                  only after its event completed.
//  host-register   zero-copy from the page cache: the file is mmap'ed, a piece
//                  is populated and cudaHostRegister'ed read-only, the copies
//                  go straight from the mapping, and the piece is unregistered
//                  once its event completed. Each thread keeps two pieces in
//                  flight, so registering piece i+1 overlaps copying piece i.
//  gds             cuFileRead straight into device memory (only where the
//                  driver has a direct path; see ChooseGds).
//
// Completion is event based: a tensor is "ready" (on_ready) once every copy
// that delivers its bytes has completed on the device.
#include "cuda/cuda_loader.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/cufile_lib.h"
#include "exec/open_files.h"
#include "exec/request.h"
#include "io/page_cache.h"
#include "plan/plan.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace weightlift::internal {

bool CudaCompiledIn() { return true; }

namespace {

// ---- Defaults tuned on the H200 (bench/gpu_sweep.cc; see the report). ----
// Device tensors are aligned like cudaMalloc's own allocations would be.
constexpr uint64_t kDeviceAlign = 256;
// Staging slot = one read. With the default staging_bytes (128 MiB) and 16
// threads this is 2 slots per thread, the H200 sweep's best (51 GB/s, 93% of
// the 55 GB/s pinned ceiling). Rings of 256 MiB and more were clearly slower
// (8 MiB x 16 x 2: 38 GB/s; 32 MiB chunks: 23-35 GB/s): a ring that fits the
// host's last-level cache lets the DMA read what pread just wrote from cache
// instead of DRAM.
constexpr size_t kDefaultChunkBytes = 4u << 20;
constexpr int kMaxDefaultThreads = 16;
constexpr size_t kDefaultPieceBytes = 256u << 20;
// auto: which path serves page-cache-resident files. false = pinned staging,
// true = host-register. Set from the H200 sweep (bench/gpu_run.sh prints the
// comparison); the reason string quotes it.
constexpr bool kAutoHostRegisterForResident = false;
// H200 sweep (13.5 GB Llama-2-7B on tmpfs): staging 51.0 GB/s (4 MiB x 16
// threads x 2 slots), host-register at most 13.5 GB/s (64-256 MiB pieces,
// 8-16 threads): registration, not the copy, is the limit there.
constexpr const char* kAutoChoiceWhy =
    "auto prefers pinned staging for resident files (H200: 51 GB/s vs 13.5 "
    "GB/s for host-register)";
constexpr size_t kPageBytes = 4096;

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool IsRamFs(const std::string& path) {
  struct statfs s;
  if (statfs(path.c_str(), &s) != 0) return false;
  return s.f_type == 0x01021994 /*TMPFS_MAGIC*/ ||
         s.f_type == static_cast<decltype(s.f_type)>(0x858458f6) /*RAMFS*/;
}

std::string Percent(double f) {
  return std::to_string(static_cast<int>(f * 100 + 0.5)) + "%";
}

// Read-only shared mapping of a whole file. Move-only.
class Mapping {
 public:
  Mapping() = default;
  static StatusOr<Mapping> Map(const std::string& path, uint64_t expect_size) {
    Mapping m;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return Status::IoErrorFromErrno(path + ": open for host-register", errno);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
      int e = errno;
      close(fd);
      return Status::IoErrorFromErrno(path + ": fstat", e);
    }
    if (static_cast<uint64_t>(st.st_size) != expect_size) {
      close(fd);
      return Status::IoError(path + ": file size changed since the header was "
                             "read: now " + std::to_string(st.st_size) +
                             " bytes, expected " + std::to_string(expect_size));
    }
    if (expect_size > 0) {
      void* p = mmap(nullptr, expect_size, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return Status::IoErrorFromErrno(
            path + ": mmap of " + std::to_string(expect_size) + " bytes", e);
      }
      m.data_ = static_cast<std::byte*>(p);
      m.size_ = expect_size;
    }
    close(fd);
    return m;
  }
  Mapping(Mapping&& o) noexcept { *this = std::move(o); }
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~Mapping() { Reset(); }
  std::byte* data() const { return data_; }

 private:
  void Reset() {
    if (data_) munmap(data_, size_);
    data_ = nullptr;
  }
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

enum class Path { kStaging, kHostRegister, kGds };

// One load in flight: the request, where each tensor goes, completion
// counters and the first error.
struct Job {
  const Checkpoint* ckpt = nullptr;
  std::vector<uint32_t> tensors;    // request index -> ckpt tensor index
  std::vector<uintptr_t> dst;       // request index -> device address
  const LoadCallbacks* callbacks = nullptr;
  std::unique_ptr<std::atomic<uint32_t>[]> remaining;  // pieces outstanding
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  std::atomic<uint64_t> delivered{0};
  uint64_t total = 0;

  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = std::move(s);
    failed.store(true, std::memory_order_relaxed);
  }
  // LEN bytes of request tensor R are on the device.
  void Delivered(uint32_t r, uint64_t len) {
    uint64_t before = delivered.fetch_add(len, std::memory_order_relaxed);
    if (callbacks->on_progress) {
      uint64_t after = before + len;
      if ((before >> 26) != (after >> 26) || after == total) {
        callbacks->on_progress(after, total);
      }
    }
    if (remaining[r].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      ReadyNow(r);
    }
  }
  void ReadyNow(uint32_t r) {
    if (callbacks->on_ready && !failed.load(std::memory_order_relaxed)) {
      callbacks->on_ready(r, ckpt->tensors()[tensors[r]]);
    }
  }
};

// Per-file decision for one load.
struct FilePlan {
  bool needed = false;
  Path path = Path::kStaging;
  File* file = nullptr;  // staging reads
  Mapping mapping;       // host-register
  CuFileHandle gds_handle = nullptr;
  int gds_fd = -1;
};

class CudaLoader final : public Loader {
 public:
  static StatusOr<std::unique_ptr<Loader>> Create(const LoadOptions& options);
  ~CudaLoader() override;

  StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                            std::span<const std::string> names,
                            const LoadCallbacks& callbacks) override;
  Status LoadInto(const Checkpoint& ckpt, std::span<const Destination> dests,
                  LoadReport* report, const LoadCallbacks& callbacks) override;
  const LoadOptions& options() const override { return options_; }

 private:
  explicit CudaLoader(const LoadOptions& o) : options_(o) {}
  Status Init();
  // Runs JOB (destinations already set) and fills REPORT.
  Status Run(Job& job, LoadReport* report);
  Status RunStaging(Job& job, const Plan& plan, std::vector<FilePlan>& files);
  Status RunHostRegister(Job& job, const Plan& plan,
                         std::vector<FilePlan>& files);
  Status RunGds(Job& job, std::vector<FilePlan>& files);

  LoadOptions options_;
  int device_ = 0;
  int threads_ = 1;            // workers per load
  int slots_per_thread_ = 2;   // staging slots per worker
  size_t slot_bytes_ = 0;      // one staging slot (= one read)
  size_t piece_bytes_ = 0;     // host-register piece
  bool host_register_ok_ = false;
  std::string host_register_why_;  // why host-register is unavailable
  std::vector<std::string> create_notes_;
  PinnedBuffer ring_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> slot_events_;   // threads_ * slots_per_thread_
  std::vector<cudaEvent_t> piece_events_;  // threads_ * 2
  std::mutex mu_;  // one load at a time
};

StatusOr<std::unique_ptr<Loader>> CudaLoader::Create(const LoadOptions& o) {
  std::unique_ptr<CudaLoader> l(new CudaLoader(o));
  WL_RETURN_IF_ERROR(l->Init());
  return std::unique_ptr<Loader>(std::move(l));
}

Status CudaLoader::Init() {
  device_ = options_.device.index;
  WL_RETURN_IF_ERROR(CheckCudaDevice(device_));
  WL_RETURN_IF_ERROR(UseDevice(device_));

  unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) hw = 8;
  threads_ = options_.threads > 0
                 ? options_.threads
                 : static_cast<int>(std::min<unsigned>(hw, kMaxDefaultThreads));
  size_t chunk = options_.cuda_chunk_bytes ? options_.cuda_chunk_bytes
                                           : kDefaultChunkBytes;
  if (chunk < (64u << 10)) {
    return Status::InvalidArgument(
        "cuda_chunk_bytes " + std::to_string(chunk) +
        " is below the minimum of 65536 bytes");
  }
  slot_bytes_ = RoundUp(chunk, kPageBytes);
  piece_bytes_ = options_.host_register_piece_bytes
                     ? RoundUp(options_.host_register_piece_bytes, kPageBytes)
                     : kDefaultPieceBytes;
  uint64_t slots = options_.staging_bytes / slot_bytes_;
  if (slots < 2) {
    return Status::InvalidArgument(
        "staging_bytes " + std::to_string(options_.staging_bytes) +
        " holds fewer than 2 staging slots of " + std::to_string(slot_bytes_) +
        " bytes (cuda_chunk_bytes); raise staging_bytes or lower the chunk");
  }
  if (slots < 2ull * threads_) {
    int t = static_cast<int>(slots / 2);
    create_notes_.push_back(
        "staging_bytes holds only " + std::to_string(slots) + " slots of " +
        std::to_string(slot_bytes_) + " bytes: using " + std::to_string(t) +
        " threads instead of " + std::to_string(threads_) +
        " (each needs 2 slots to overlap reads and copies)");
    threads_ = t;
  }
  slots_per_thread_ = static_cast<int>(slots / threads_);

  // Can this device copy straight from a registered read-only file mapping?
  int reg = 0, reg_ro = 0;
  cudaDeviceGetAttribute(&reg, cudaDevAttrHostRegisterSupported, device_);
  cudaDeviceGetAttribute(&reg_ro, cudaDevAttrHostRegisterReadOnlySupported,
                         device_);
  (void)cudaGetLastError();
  host_register_ok_ = reg && reg_ro;
  if (!host_register_ok_) {
    host_register_why_ = std::string("cuda:") + std::to_string(device_) +
                         (reg ? " cannot register read-only host memory "
                                "(cudaDevAttrHostRegisterReadOnlySupported=0)"
                              : " cannot register host memory "
                                "(cudaDevAttrHostRegisterSupported=0)");
    if (options_.host_register == HostRegisterMode::kOn) {
      return Status::Unsupported("host_register=on: " + host_register_why_);
    }
  }

  WL_ASSIGN_OR_RETURN(ring_, PinnedBuffer::Allocate(static_cast<uint64_t>(
                                 slots_per_thread_) * threads_ * slot_bytes_));
  int nstreams = options_.copy_streams > 0
                     ? std::min(options_.copy_streams, threads_)
                     : threads_;
  streams_.assign(nstreams, nullptr);
  for (auto& s : streams_) {
    WL_RETURN_IF_ERROR(CudaStatus(
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags on cuda:" + std::to_string(device_)));
  }
  // Blocking-sync events: a waiting worker sleeps instead of spinning on a
  // core that other workers need for their reads.
  auto make_events = [&](std::vector<cudaEvent_t>& v, size_t n) -> Status {
    v.assign(n, nullptr);
    for (auto& e : v) {
      WL_RETURN_IF_ERROR(CudaStatus(
          cudaEventCreateWithFlags(
              &e, cudaEventDisableTiming | cudaEventBlockingSync),
          "cudaEventCreateWithFlags"));
    }
    return Status::OK();
  };
  WL_RETURN_IF_ERROR(
      make_events(slot_events_, static_cast<size_t>(threads_) *
                                    slots_per_thread_));
  WL_RETURN_IF_ERROR(make_events(piece_events_, 2ull * threads_));
  return Status::OK();
}

CudaLoader::~CudaLoader() {
  cudaSetDevice(device_);
  for (auto s : streams_) {
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
  for (auto e : slot_events_) if (e) cudaEventDestroy(e);
  for (auto e : piece_events_) if (e) cudaEventDestroy(e);
}

// ----------------------------------------------------------------- staging

Status CudaLoader::RunStaging(Job& job, const Plan& plan,
                              std::vector<FilePlan>& files) {
  if (plan.chunks.empty()) return Status::OK();
  std::atomic<size_t> next{0};
  auto worker = [&](int w) {
    if (Status s = UseDevice(device_); !s.ok()) return job.Fail(s);
    cudaStream_t stream = streams_[w % streams_.size()];
    struct Slot {
      std::byte* buf;
      cudaEvent_t ev;
      const ReadChunk* chunk = nullptr;  // pending copies, null when free
    };
    std::vector<Slot> slots(slots_per_thread_);
    for (int i = 0; i < slots_per_thread_; ++i) {
      size_t k = static_cast<size_t>(w) * slots_per_thread_ + i;
      slots[i].buf = ring_.data() + k * slot_bytes_;
      slots[i].ev = slot_events_[k];
    }
    auto complete = [&](Slot& s) {
      for (const Scatter& sc : s.chunk->scatters) {
        job.Delivered(sc.tensor, sc.length);
      }
      s.chunk = nullptr;
    };
    int cur = 0;
    while (!job.failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= plan.chunks.size()) break;
      const ReadChunk& c = plan.chunks[i];
      Slot& s = slots[cur];
      cur = (cur + 1) % slots_per_thread_;
      if (s.chunk) {
        cudaError_t e = cudaEventSynchronize(s.ev);
        if (e != cudaSuccess) {
          job.Fail(CudaStatus(e, "cudaEventSynchronize (staging slot)"));
          s.chunk = nullptr;
          break;
        }
        complete(s);
      }
      File* f = files[c.file].file;
      uint64_t room = RoundUp(c.length, f->alignment());
      if (room > slot_bytes_) {
        job.Fail(Status::Internal(
            "plan chunk of " + std::to_string(c.length) + " bytes at offset " +
            std::to_string(c.offset) + " of " + f->path() +
            " exceeds the staging slot of " + std::to_string(slot_bytes_)));
        break;
      }
      Status st = f->ReadAt(c.offset, std::span<std::byte>(s.buf, c.length));
      if (!st.ok()) {
        job.Fail(st);
        break;
      }
      if (job.failed.load(std::memory_order_relaxed)) break;
      bool ok = true;
      for (const Scatter& sc : c.scatters) {
        cudaError_t e = cudaMemcpyAsync(
            reinterpret_cast<void*>(sc.dst), s.buf + sc.chunk_offset,
            sc.length, cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) {
          const TensorInfo& t = job.ckpt->tensors()[job.tensors[sc.tensor]];
          job.Fail(CudaStatus(e, "cudaMemcpyAsync of " +
                                     std::to_string(sc.length) +
                                     " bytes of tensor '" + t.name + "' from " +
                                     f->path()));
          ok = false;
          break;
        }
      }
      // Record even after a failed enqueue so the drain below waits for
      // whatever was enqueued before the slot is reused.
      cudaError_t e = cudaEventRecord(s.ev, stream);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventRecord (staging slot)"));
        cudaStreamSynchronize(stream);
        break;
      }
      if (!ok) {
        cudaEventSynchronize(s.ev);
        break;
      }
      s.chunk = &c;
      // Fire on_ready early: retire slots whose copies already finished.
      for (Slot& o : slots) {
        if (&o != &s && o.chunk && cudaEventQuery(o.ev) == cudaSuccess) {
          complete(o);
        }
      }
    }
    // Drain: the staging ring must be idle before it is reused or freed.
    for (Slot& s : slots) {
      if (!s.chunk) continue;
      cudaError_t e = cudaEventSynchronize(s.ev);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventSynchronize (staging drain)"));
      } else {
        complete(s);
      }
      s.chunk = nullptr;
    }
  };
  std::vector<std::thread> pool;
  int n = static_cast<int>(
      std::min<size_t>(threads_, plan.chunks.size()));
  for (int w = 1; w < n; ++w) pool.emplace_back(worker, w);
  worker(0);
  for (auto& t : pool) t.join();
  return Status::OK();
}

// ----------------------------------------------------------- host-register

Status CudaLoader::RunHostRegister(Job& job, const Plan& plan,
                                   std::vector<FilePlan>& files) {
  if (plan.chunks.empty()) return Status::OK();
  std::atomic<size_t> next{0};
  std::atomic<bool> populate_ok{true};
  auto worker = [&](int w) {
    if (Status s = UseDevice(device_); !s.ok()) return job.Fail(s);
    cudaStream_t stream = streams_[w % streams_.size()];
    struct Held {
      void* base = nullptr;
      cudaEvent_t ev;
      const ReadChunk* chunk = nullptr;
    };
    Held held[2];
    held[0].ev = piece_events_[2 * w];
    held[1].ev = piece_events_[2 * w + 1];
    auto retire = [&](Held& h) {
      cudaError_t e = cudaEventSynchronize(h.ev);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventSynchronize (host-register piece)"));
      }
      cudaError_t u = cudaHostUnregister(h.base);
      if (u != cudaSuccess && e == cudaSuccess) {
        job.Fail(CudaStatus(u, "cudaHostUnregister"));
      }
      if (e == cudaSuccess && u == cudaSuccess) {
        for (const Scatter& sc : h.chunk->scatters) {
          job.Delivered(sc.tensor, sc.length);
        }
      }
      h.chunk = nullptr;
    };
    int cur = 0;
    while (!job.failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= plan.chunks.size()) break;
      const ReadChunk& c = plan.chunks[i];
      const FileInfo& fi = job.ckpt->files()[c.file];
      std::byte* base = files[c.file].mapping.data() + c.offset;
      uint64_t len = c.length;
      // Fault the piece's pages in first (a page-table walk over cached
      // pages); registering then only pins them. Best effort: kernels
      // before 5.14 lack MADV_POPULATE_READ and registration faults instead.
      if (populate_ok.load(std::memory_order_relaxed) &&
          madvise(base, RoundUp(len, kPageBytes), MADV_POPULATE_READ) != 0) {
        int err = errno;
        if (err == EINVAL) {
          populate_ok = false;
        } else {
          job.Fail(Status::IoErrorFromErrno(
              fi.path + ": madvise(MADV_POPULATE_READ) offset " +
                  std::to_string(c.offset) + " length " + std::to_string(len),
              err));
          break;
        }
      }
      Held& h = held[cur];
      cur ^= 1;
      if (h.chunk) retire(h);
      if (job.failed.load(std::memory_order_relaxed)) break;
      cudaError_t e = cudaHostRegister(base, len, cudaHostRegisterReadOnly);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        job.Fail(CudaStatus(e, fi.path + ": cudaHostRegister(ReadOnly) of " +
                                   std::to_string(len) + " bytes at offset " +
                                   std::to_string(c.offset)));
        break;
      }
      h.base = base;
      h.chunk = &c;
      for (const Scatter& sc : c.scatters) {
        e = cudaMemcpyAsync(reinterpret_cast<void*>(sc.dst),
                            base + sc.chunk_offset, sc.length,
                            cudaMemcpyHostToDevice, stream);
        if (e != cudaSuccess) {
          job.Fail(CudaStatus(e, fi.path + ": cudaMemcpyAsync from the "
                                 "registered mapping"));
          break;
        }
      }
      e = cudaEventRecord(h.ev, stream);
      if (e != cudaSuccess) {
        job.Fail(CudaStatus(e, "cudaEventRecord (host-register piece)"));
        cudaStreamSynchronize(stream);
      }
    }
    for (Held& h : held) {
      if (h.chunk) retire(h);
    }
  };
  std::vector<std::thread> pool;
  int n = static_cast<int>(std::min<size_t>(threads_, plan.chunks.size()));
  for (int w = 1; w < n; ++w) pool.emplace_back(worker, w);
  worker(0);
  for (auto& t : pool) t.join();
  return Status::OK();
}

// --------------------------------------------------------------------- GDS

Status CudaLoader::RunGds(Job& job, std::vector<FilePlan>& files) {
  struct Unit {
    uint32_t file, r;
    uint64_t offset, length;
    uintptr_t dst;
  };
  std::vector<Unit> units;
  const auto& all = job.ckpt->tensors();
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    const TensorInfo& t = all[job.tensors[r]];
    if (files[t.file].path != Path::kGds || t.size == 0) continue;
    for (uint64_t o = 0; o < t.size; o += slot_bytes_) {
      uint64_t len = std::min<uint64_t>(slot_bytes_, t.size - o);
      units.push_back({t.file, r, t.offset + o, len, job.dst[r] + o});
    }
  }
  if (units.empty()) return Status::OK();
  WL_ASSIGN_OR_RETURN(CuFileLib * lib, CuFileLib::Get());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    if (Status s = UseDevice(device_); !s.ok()) return job.Fail(s);
    while (!job.failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= units.size()) break;
      const Unit& u = units[i];
      Status s = lib->Read(files[u.file].gds_handle,
                           reinterpret_cast<void*>(u.dst), u.length, u.offset,
                           job.ckpt->files()[u.file].path);
      if (!s.ok()) return job.Fail(s);
      job.Delivered(u.r, u.length);  // cuFileRead is synchronous
    }
  };
  std::vector<std::thread> pool;
  int n = static_cast<int>(std::min<size_t>(threads_, units.size()));
  for (int w = 1; w < n; ++w) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return Status::OK();
}

// --------------------------------------------------------------------- run

Status CudaLoader::Run(Job& job, LoadReport* report) {
  const Checkpoint& ckpt = *job.ckpt;
  auto t_open = Clock::now();
  std::vector<std::string>& notes = report->notes;
  notes.insert(notes.end(), create_notes_.begin(), create_notes_.end());
  std::vector<bool> needed = FilesNeeded(ckpt, job.tensors);
  WL_ASSIGN_OR_RETURN(std::vector<OpenedFile> opened,
                      OpenCheckpointFiles(ckpt, options_, needed, &notes));

  // ---- Choose a path per file.
  std::vector<FilePlan> files(ckpt.files().size());
  bool nvfs = NvidiaFsLoaded();
  std::vector<int> report_index(files.size(), -1);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!needed[i] || !opened[i].file) continue;
    const FileInfo& fi = ckpt.files()[i];
    FilePlan& fp = files[i];
    fp.needed = true;
    fp.file = opened[i].file.get();
    FileReport fr = opened[i].report;
    if (fr.path.empty()) fr.path = fi.path;
    bool ramfs = IsRamFs(fi.resolved_path.empty() ? fi.path
                                                  : fi.resolved_path);
    double frac = opened[i].resident_fraction;
    if (frac < 0 && !ramfs) {  // backend named explicitly: not sampled yet
      if (auto r = SampleResidency(fi.path); r.ok()) frac = r->fraction;
    }
    bool resident = ramfs || frac >= options_.resident_threshold;
    std::string residency =
        ramfs ? "file on tmpfs/ramfs (always resident)"
              : frac < 0 ? "residency not sampled"
                         : "pages " + Percent(frac) + " resident (sampled)";

    // GDS first: only where the driver has a real direct path.
    std::string gds_why;
    bool try_gds = false;
    if (options_.gds == GdsMode::kOff) {
      gds_why = "gds=off";
    } else if (!nvfs) {
      gds_why = "GDS unavailable: nvidia-fs not loaded (/proc/driver/nvidia-fs "
                "absent), so cuFile has no direct path";
      if (options_.gds == GdsMode::kOn) {
        return Status::Unsupported("gds=on but GDS cannot serve " + fi.path +
                                   ": nvidia-fs kernel module not loaded "
                                   "(/proc/driver/nvidia-fs absent); cuFile "
                                   "would only run in compatibility mode");
      }
    } else if (options_.gds == GdsMode::kAuto && resident) {
      gds_why = "GDS not used: " + residency + ", the page cache is faster";
    } else {
      try_gds = true;
    }
    if (try_gds) {
      auto lib = CuFileLib::Get();
      Status s = lib.status();
      if (s.ok()) {
        fp.gds_fd = open(fi.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (fp.gds_fd < 0) {
          s = Status::IoErrorFromErrno(fi.path + ": open O_DIRECT for GDS",
                                       errno);
        } else {
          auto h = (*lib)->RegisterFile(fp.gds_fd, fi.path);
          if (h.ok()) {
            fp.gds_handle = *h;
          } else {
            s = h.status();
            close(fp.gds_fd);
            fp.gds_fd = -1;
          }
        }
      }
      if (s.ok()) {
        fp.path = Path::kGds;
        fr.path_taken = "gds";
        fr.reason = "nvidia-fs loaded; cuFileHandleRegister accepted the file";
      } else if (options_.gds == GdsMode::kOn) {
        return Status::Unsupported("gds=on: " + s.message());
      } else {
        gds_why = "GDS refused: " + s.message();
        notes.push_back(fi.path + ": " + gds_why + "; fell back");
      }
    }
    if (fp.path != Path::kGds) {
      // HR_WHY: why host-register was (not) taken, without the residency
      // (the open reason already states it for the staging path).
      bool hr = false;
      std::string hr_why;
      if (options_.host_register == HostRegisterMode::kOn) {
        hr = true;
        hr_why = "host_register=on";
      } else if (options_.host_register == HostRegisterMode::kOff) {
        hr_why = "host_register=off";
      } else if (!resident) {
        hr_why = "not resident, so not host-register";
      } else if (!host_register_ok_) {
        hr_why = "host-register unavailable: " + host_register_why_;
      } else {
        hr = kAutoHostRegisterForResident;
        hr_why = kAutoChoiceWhy;
      }
      if (hr) {
        auto m = Mapping::Map(fi.path, fi.size);
        if (!m.ok()) return m.status();
        fp.mapping = std::move(m).value();
        fp.path = Path::kHostRegister;
        fr.path_taken = "host-register";
        fr.reason = residency + "; " + hr_why + "; " + gds_why;
      } else {
        fp.path = Path::kStaging;
        fr.path_taken = "pinned-staging+" +
                        std::string(fp.file->backend_name());
        std::string io_why = opened[i].report.reason.empty()
                                 ? residency
                                 : opened[i].report.reason;
        if (ramfs) io_why = residency + "; " + io_why;
        fr.reason = io_why + "; " + hr_why + "; " + gds_why;
      }
    }
    fr.bytes = 0;
    report_index[i] = static_cast<int>(report->files.size());
    report->files.push_back(std::move(fr));
  }
  report->open_seconds = SecondsSince(t_open);

  // ---- Plan each path's segments.
  const auto& all = ckpt.tensors();
  std::vector<Segment> staging_segs, hr_segs;
  std::vector<uint32_t> gds_pieces(job.tensors.size(), 0);
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    const TensorInfo& t = all[job.tensors[r]];
    report->files[report_index[t.file]].bytes += t.size;
    if (t.size == 0) continue;
    Segment seg{t.file, t.offset, t.size, job.dst[r], r};
    switch (files[t.file].path) {
      case Path::kStaging: staging_segs.push_back(seg); break;
      case Path::kHostRegister: hr_segs.push_back(seg); break;
      case Path::kGds:
        gds_pieces[r] = static_cast<uint32_t>(
            (t.size + slot_bytes_ - 1) / slot_bytes_);
        break;
    }
  }
  std::vector<PlanFile> staging_pf(files.size()), hr_pf(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    staging_pf[i].size = hr_pf[i].size = ckpt.files()[i].size;
    staging_pf[i].allow_direct = hr_pf[i].allow_direct = false;
    hr_pf[i].alignment = kPageBytes;
    if (files[i].needed && files[i].path == Path::kStaging) {
      staging_pf[i].alignment = files[i].file->alignment();
    }
  }
  PlanOptions spo;
  // The planner keeps every aligned read span within chunk_bytes.
  spo.chunk_bytes = slot_bytes_;
  spo.direct_min_bytes = UINT64_MAX;
  Plan staging_plan = MakePlan(staging_segs, staging_pf, job.tensors.size(), spo);
  PlanOptions hpo;
  hpo.chunk_bytes = piece_bytes_;
  hpo.direct_min_bytes = UINT64_MAX;
  Plan hr_plan = MakePlan(hr_segs, hr_pf, job.tensors.size(), hpo);

  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    uint32_t n = staging_plan.pieces_per_tensor[r] + hr_plan.pieces_per_tensor[r] +
                 gds_pieces[r];
    job.remaining[r].store(n, std::memory_order_relaxed);
  }
  report->bytes_read = staging_plan.bytes_read + hr_plan.bytes_read;
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    if (gds_pieces[r]) report->bytes_read += all[job.tensors[r]].size;
  }

  // ---- Transfer.
  auto t_xfer = Clock::now();
  for (uint32_t r = 0; r < job.tensors.size(); ++r) {
    if (job.remaining[r].load(std::memory_order_relaxed) == 0) job.ReadyNow(r);
  }
  Status s = RunGds(job, files);
  if (!s.ok()) job.Fail(s);
  if (!job.failed) {
    s = RunHostRegister(job, hr_plan, files);
    if (!s.ok()) job.Fail(s);
  }
  if (!job.failed) {
    s = RunStaging(job, staging_plan, files);
    if (!s.ok()) job.Fail(s);
  }
  for (auto& f : files) {
    if (f.gds_handle) {
      if (auto lib = CuFileLib::Get(); lib.ok()) (*lib)->DeregisterFile(f.gds_handle);
    }
    if (f.gds_fd >= 0) close(f.gds_fd);
  }
  report->transfer_seconds = SecondsSince(t_xfer);
  if (job.failed) {
    std::lock_guard<std::mutex> lock(job.mu);
    return job.first_error;
  }
  report->bytes = job.delivered.load();
  return Status::OK();
}

void FillReportHeader(LoadReport* r, const LoadOptions& o, int threads,
                      uint64_t staging) {
  r->device = o.device;
  r->threads = threads;
  r->staging_bytes = staging;
}

StatusOr<LoadResult> CudaLoader::Load(const Checkpoint& ckpt,
                                      std::span<const std::string> names,
                                      const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> idx, ResolveNames(ckpt, names));
  WL_RETURN_IF_ERROR(UseDevice(device_));
  LoadResult result;
  LoadReport& report = result.report;
  FillReportHeader(&report, options_, threads_, ring_.size());

  // ---- One device allocation for the whole load, tensors 256-aligned.
  auto t_alloc = Clock::now();
  const auto& all = ckpt.tensors();
  std::vector<uint64_t> offs(idx.size());
  uint64_t total = 0, tensor_bytes = 0;
  for (size_t r = 0; r < idx.size(); ++r) {
    uint64_t size = all[idx[r]].size;
    offs[r] = RoundUp(total, kDeviceAlign);
    if (offs[r] < total || offs[r] + size < offs[r]) {
      return Status::InvalidArgument("device layout overflows 64 bits");
    }
    total = offs[r] + size;
    tensor_bytes += size;
  }
  size_t free_b = 0, total_b = 0;
  WL_RETURN_IF_ERROR(CudaStatus(cudaMemGetInfo(&free_b, &total_b),
                                "cudaMemGetInfo"));
  if (total > free_b) {
    return Status::ResourceExhausted(
        "cuda:" + std::to_string(device_) + ": loading " +
        std::to_string(idx.size()) + " tensors needs " + FormatBytes(total) +
        " of device memory (tensor bytes + 256-byte alignment) but only " +
        FormatBytes(free_b) + " of " + FormatBytes(total_b) + " is free");
  }
  WL_ASSIGN_OR_RETURN(DeviceBuffer buf, DeviceBuffer::Allocate(device_, total));
  int dev = device_;
  std::byte* base = buf.release();
  std::shared_ptr<void> owner(base, [dev](void* p) {
    if (!p) return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(dev);
    cudaFree(p);
    if (prev >= 0 && prev != dev) cudaSetDevice(prev);
  });
  report.alloc_seconds = SecondsSince(t_alloc);
  report.device_bytes = total;

  Job job;
  job.ckpt = &ckpt;
  job.tensors = idx;
  job.callbacks = &callbacks;
  job.total = tensor_bytes;
  job.dst.resize(idx.size());
  job.remaining.reset(new std::atomic<uint32_t>[idx.size()]);
  for (size_t r = 0; r < idx.size(); ++r) {
    job.dst[r] = reinterpret_cast<uintptr_t>(base) + offs[r];
  }
  Status s = Run(job, &report);
  if (!s.ok()) return s;  // OWNER frees the device memory here

  result.tensors.reserve(idx.size());
  for (size_t r = 0; r < idx.size(); ++r) {
    const TensorInfo& t = all[idx[r]];
    LoadedTensor lt;
    lt.name = t.name;
    lt.dtype = t.dtype;
    lt.shape = t.shape;
    lt.device = options_.device;
    lt.data = base + offs[r];
    lt.size = t.size;
    lt.owner = owner;
    result.tensors.push_back(std::move(lt));
  }
  report.tensors = idx.size();
  report.seconds = SecondsSince(t0);
  return result;
}

Status CudaLoader::LoadInto(const Checkpoint& ckpt,
                            std::span<const Destination> dests,
                            LoadReport* report_out,
                            const LoadCallbacks& callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t0 = Clock::now();
  WL_ASSIGN_OR_RETURN(std::vector<uint32_t> idx,
                      ResolveDestinations(ckpt, dests));
  WL_RETURN_IF_ERROR(UseDevice(device_));
  // Every destination must be device memory of this loader's device.
  for (const Destination& d : dests) {
    if (d.size == 0) continue;
    cudaPointerAttributes a{};
    cudaError_t e = cudaPointerGetAttributes(&a, d.data);
    if (e != cudaSuccess) (void)cudaGetLastError();
    bool on_device = e == cudaSuccess &&
                     (a.type == cudaMemoryTypeDevice ||
                      a.type == cudaMemoryTypeManaged) &&
                     a.device == device_;
    if (!on_device) {
      return Status::InvalidArgument(
          "destination of tensor '" + d.name + "' is not device memory of "
          "cuda:" + std::to_string(device_) +
          (e == cudaSuccess ? " (pointer type " + std::to_string(a.type) +
                                  ", device " + std::to_string(a.device) + ")"
                            : std::string(" (") + cudaGetErrorName(e) + ")"));
    }
  }
  LoadReport local;
  LoadReport& report = report_out ? *report_out : local;
  report = LoadReport{};
  FillReportHeader(&report, options_, threads_, ring_.size());
  Job job;
  job.ckpt = &ckpt;
  job.tensors = idx;
  job.callbacks = &callbacks;
  job.dst.resize(idx.size());
  job.remaining.reset(new std::atomic<uint32_t>[idx.size()]);
  for (size_t r = 0; r < idx.size(); ++r) {
    job.dst[r] = reinterpret_cast<uintptr_t>(dests[r].data);
    job.total += dests[r].size;
  }
  WL_RETURN_IF_ERROR(Run(job, &report));
  report.tensors = idx.size();
  report.seconds = SecondsSince(t0);
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Loader>> CreateCudaLoader(const LoadOptions& options) {
  if (!options.device.is_cuda()) {
    return Status::InvalidArgument("CreateCudaLoader needs a cuda device, got " +
                                   options.device.ToString());
  }
  return CudaLoader::Create(options);
}

}  // namespace weightlift::internal
