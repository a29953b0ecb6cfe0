#include "cuda/cuda_util.h"

#include <cuda.h>  // types only: the driver is reached through the runtime

#include <algorithm>
#include <cstdio>
#include <utility>

namespace weightlift::internal {

Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::OK();
  return Status::CudaError(what + ": " + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ")");
}

Status CheckCudaDevice(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // cudaGetDeviceCount leaves a sticky-free error; clear it for later calls.
    (void)cudaGetLastError();
    std::string name = cudaGetErrorName(err);
    std::string text = cudaGetErrorString(err);
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
      return Status::Unsupported("cuda:" + std::to_string(device) +
                                 " requested but no usable CUDA device: "
                                 "cudaGetDeviceCount failed with " +
                                 name + " (" + text + ")");
    }
    return Status::CudaError("cuda:" + std::to_string(device) +
                             " requested but cudaGetDeviceCount failed with " +
                             name + " (" + text + ")");
  }
  if (count == 0) {
    return Status::Unsupported("cuda:" + std::to_string(device) +
                               " requested but this machine has no CUDA "
                               "device (cudaGetDeviceCount = 0)");
  }
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("cuda:" + std::to_string(device) +
                                   " does not exist: this machine has " +
                                   std::to_string(count) + " CUDA device(s)");
  }
  return Status::OK();
}

void* DriverEntryPoint(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault,
                                       &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

Status UseDevice(int device) {
  return CudaStatus(cudaSetDevice(device),
                    "cudaSetDevice(" + std::to_string(device) + ")");
}

namespace {

using CtxGetCurrentFn = CUresult (*)(CUcontext*);
using CtxSetCurrentFn = CUresult (*)(CUcontext);

struct ContextCalls {
  CtxGetCurrentFn get = DriverFn<CtxGetCurrentFn>("cuCtxGetCurrent");
  CtxSetCurrentFn set = DriverFn<CtxSetCurrentFn>("cuCtxSetCurrent");
};

const ContextCalls& Contexts() {
  static const ContextCalls calls;
  return calls;
}

}  // namespace

ScopedDevice::ScopedDevice(int device) {
  const ContextCalls& ctx = Contexts();
  CUcontext before = nullptr;
  restore_ = ctx.get && ctx.set && ctx.get(&before) == CUDA_SUCCESS;
  previous_ = before;
  error_ = cudaSetDevice(device);
}

ScopedDevice::~ScopedDevice() {
  if (restore_) Contexts().set(static_cast<CUcontext>(previous_));
}

std::string FormatBytes(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB (%llu bytes)",
                static_cast<double>(bytes) / (1ull << 30),
                static_cast<unsigned long long>(bytes));
  return buf;
}

// ---------------------------------------------------------------- Pinned

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(uint64_t bytes) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  void* p = nullptr;
  cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    Status s = CudaStatus(err, "cudaHostAlloc of " + FormatBytes(bytes) +
                                   " pinned staging memory");
    if (err == cudaErrorMemoryAllocation) {
      return Status::ResourceExhausted(s.message());
    }
    return s;
  }
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = bytes;
  return b;
}

StatusOr<PinnedBuffer> PinnedBuffer::Reserve(uint64_t bytes, int parts) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  // The ring starts on a 2 MiB boundary (the mapping is 2 MiB longer), so
  // that parts of whole 2 MiB make whole huge pages: each worker faults in
  // and pins only pages of its own part, a few huge pages instead of
  // thousands of 4 KiB ones.
  constexpr uint64_t kHuge = 2u << 20;
  WL_ASSIGN_OR_RETURN(
      b.mapping_,
      Mapping::Anonymous(bytes + kHuge, "pinned staging memory", true));
  const uint64_t page = 4096;
  const uint64_t n = static_cast<uint64_t>(std::max(parts, 1));
  b.part_bytes_ = (bytes / n + page - 1) / page * page;
  b.pinned_.assign(n, 0);
  b.pin_seconds_ = std::make_unique<std::atomic<double>[]>(n);
  const auto at = reinterpret_cast<uintptr_t>(b.mapping_.data());
  b.data_ = b.mapping_.data() + ((kHuge - at % kHuge) % kHuge);
  b.size_ = bytes;
  return b;
}

Status PinnedBuffer::PinPart(int part, int device) {
  if (part_pinned(part)) return Status::OK();
  if (part < 0 || static_cast<size_t>(part) >= pinned_.size()) {
    return Status::Internal("pinned part " + std::to_string(part) + " of " +
                            std::to_string(pinned_.size()));
  }
  const uint64_t at = static_cast<uint64_t>(part) * part_bytes_;
  if (at >= size_) {
    pinned_[part] = 1;  // an empty last part
    return Status::OK();
  }
  const uint64_t len = std::min(part_bytes_, size_ - at);
  WL_RETURN_IF_ERROR(UseDevice(device));
  const auto t = Clock::now();
  std::byte* p = data_ + at;
  cudaError_t e = cudaHostRegister(p, len, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    Status st =
        CudaStatus(e, "cudaHostRegister of " + FormatBytes(len) + " (part " +
                          std::to_string(part + 1) + " of " +
                          std::to_string(pinned_.size()) + " of " +
                          FormatBytes(size_) + " pinned staging memory)");
    return e == cudaErrorMemoryAllocation
               ? Status::ResourceExhausted(st.message())
               : st;
  }
  pinned_[part] = 1;
  pin_seconds_[part].store(SecondsSince(t), std::memory_order_relaxed);
  return Status::OK();
}

std::vector<double> PinnedBuffer::TakePinSeconds() {
  std::vector<double> out(pinned_.size(), 0.0);
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = pin_seconds_[k].exchange(0.0, std::memory_order_relaxed);
  }
  return out;
}

void PinnedBuffer::Reset() {
  if (!mapping_.empty()) {
    for (size_t k = 0; k < pinned_.size(); ++k) {
      const uint64_t at = k * part_bytes_;
      if (pinned_[k] && at < size_) cudaHostUnregister(data_ + at);
    }
    pinned_.clear();
    mapping_.Reset();
  } else if (data_) {
    cudaFreeHost(data_);
  }
  data_ = nullptr;
  size_ = 0;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapping_ = std::move(o.mapping_);
    part_bytes_ = std::exchange(o.part_bytes_, 0);
    pinned_ = std::move(o.pinned_);
    o.pinned_.clear();
    pin_seconds_ = std::move(o.pin_seconds_);
  }
  return *this;
}

// ---------------------------------------------------------------- Device

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, uint64_t bytes) {
  DeviceBuffer b;
  b.device_ = device;
  if (bytes == 0) return b;
  WL_RETURN_IF_ERROR(UseDevice(device));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the non-sticky error
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    std::string msg = "cudaMalloc of " + FormatBytes(bytes) +
                      " on cuda:" + std::to_string(device) + " failed with " +
                      cudaGetErrorName(err) + "; free " + FormatBytes(free_b) +
                      " of " + FormatBytes(total_b);
    if (err == cudaErrorMemoryAllocation) {
      return Status::ResourceExhausted(msg);
    }
    return Status::CudaError(msg);
  }
  b.data_ = static_cast<std::byte*>(p);
  b.size_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) {
      ScopedDevice on(device_);
      cudaFree(data_);
    }
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    device_ = o.device_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) {
    ScopedDevice on(device_);
    cudaFree(data_);
  }
}

std::byte* DeviceBuffer::release() {
  size_ = 0;
  return std::exchange(data_, nullptr);
}

// ---------------------------------------------------------------- Events

StatusOr<CudaEvents> CudaEvents::Create(size_t n) {
  CudaEvents v;
  v.events_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    cudaEvent_t e = nullptr;
    WL_RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(
                       &e, cudaEventDisableTiming | cudaEventBlockingSync),
                   "cudaEventCreateWithFlags"));
    v.events_.push_back(e);
  }
  return v;
}

CudaEvents& CudaEvents::operator=(CudaEvents&& o) noexcept {
  if (this != &o) {
    Reset();
    events_ = std::exchange(o.events_, {});
  }
  return *this;
}

CudaEvents::~CudaEvents() { Reset(); }

void CudaEvents::Reset() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  events_.clear();
}

}  // namespace weightlift::internal
