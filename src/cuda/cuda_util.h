// Small helpers over the CUDA runtime API shared by the CUDA loader and the
// baselines: error translation and move-only owners of CUDA resources.
// Only compiled when WL_HAVE_CUDA (the toolkit was found at build time).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "env/mapping.h"
#include "util/clock.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// CudaError status "WHAT: cudaErrorName (description)"; OK for cudaSuccess.
Status CudaStatus(cudaError_t err, const std::string& what);

// Checks that DEVICE exists and can be used: the driver loads, a device with
// that ordinal exists. Does not create a context on any other device.
// Unsupported when there is no driver or no device at all (the message names
// cudaGetDeviceCount's error), InvalidArgument for an ordinal out of range.
Status CheckCudaDevice(int device);

// cudaSetDevice(DEVICE) as a Status.
Status UseDevice(int device);

// The driver's entry point NAME (CUDA 12 ABI) from the driver the runtime
// loaded, so the library never links libcuda (a build must run where no
// driver exists); null when the driver does not offer it.
void* DriverEntryPoint(const char* name);
template <typename Fn>
Fn DriverFn(const char* name) {
  return reinterpret_cast<Fn>(DriverEntryPoint(name));
}

// Makes DEVICE current on this thread for the guard's life, then gives the
// thread back the context it had before, or none. "Restoring" with
// cudaSetDevice(cudaGetDevice()) would not do: on a thread with no context
// (a job thread; whichever thread drops the last owner of device memory)
// cudaGetDevice says 0, and cudaSetDevice(0) creates a context on GPU 0
// (CUDA 12 initializes the device's primary context there), ~0.5 GB of
// another rank's GPU for every tensor-parallel rank on cuda:1 and up. The
// contexts are read and set through the driver the runtime loaded
// (cuCtxGetCurrent / cuCtxSetCurrent); where the driver offers neither,
// DEVICE simply stays current (it is this rank's own device). A thread
// left with no context still has DEVICE as the runtime's device for it
// (cudaGetDevice), so its next CUDA call uses DEVICE, never GPU 0: the
// runtime cannot be given back "device 0, no context" without making
// that context.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  // cudaSetDevice(DEVICE)'s result.
  cudaError_t error() const { return error_; }

 private:
  void* previous_ = nullptr;  // the thread's CUcontext before, or null
  bool restore_ = false;
  cudaError_t error_ = cudaSuccess;
};

// "12.34 GiB (13245... bytes)"
std::string FormatBytes(uint64_t bytes);

// Pinned (page-locked) host memory. Move-only. Either one cudaHostAlloc
// block (Allocate), or anonymous memory reserved in parts that are pinned
// one by one (Reserve + PinPart; the staging ring pins one part per wave,
// staging_sink.h).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static StatusOr<PinnedBuffer> Allocate(uint64_t bytes);
  // BYTES of anonymous memory (huge pages asked for: fewer pages to pin) in
  // PARTS equal parts, page multiples (the last may be shorter), none of
  // them pinned yet. Why not one cudaHostAlloc: on the H200 it pins ~2 GB/s
  // on one thread (the 128 MiB staging ring was 65 ms of a first call's
  // 68 ms setup), while threads that first-write their own pieces and a
  // registration per part overlap the pinning with the first transfers.
  // ResourceExhausted when the mapping fails.
  static StatusOr<PinnedBuffer> Reserve(uint64_t bytes, int parts);
  // Registers part PART (cudaHostRegister with DEVICE current: a rank
  // never touches another GPU) unless it is pinned already. The caller
  // first-writes the part's pages before (the staging ring's workers do it
  // in parallel), so that registering only pins pages already there. Each
  // part must be pinned by one thread at a time; different parts at once.
  // ResourceExhausted (no memory, a memlock or address-space limit) or
  // CudaError naming cudaHostRegister, the part and the size; the part
  // stays unpinned, so a later call may try again.
  Status PinPart(int part, int device);
  bool part_pinned(int part) const {
    return part >= 0 && static_cast<size_t>(part) < pinned_.size() &&
           pinned_[part];
  }
  // Seconds the registration of each part took since the last
  // TakePinSeconds; 0 for parts not pinned in that time. Safe at any time;
  // a part pinned while this runs is counted by the next call.
  std::vector<double> TakePinSeconds();
  PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  ~PinnedBuffer() { Reset(); }
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void Reset();
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  Mapping mapping_;  // Reserve: the memory
  uint64_t part_bytes_ = 0;
  // One flag per part, each written only by the thread pinning it (a
  // vector<char>, not vector<bool>: no two parts share a byte).
  std::vector<char> pinned_;
  // Per part: seconds its pinning took, until TakePinSeconds. Atomic: a
  // worker may pin its part while another thread takes the figures.
  std::unique_ptr<std::atomic<double>[]> pin_seconds_;
};

// Device memory from cudaMalloc on one device. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // ResourceExhausted naming BYTES and the device's free memory when the
  // allocation fails for lack of memory.
  static StatusOr<DeviceBuffer> Allocate(int device, uint64_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Gives up ownership; the caller must cudaFree the pointer.
  std::byte* release();

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  int device_ = 0;
};

// N events made with cudaEventDisableTiming | cudaEventBlockingSync: a
// waiting worker sleeps instead of spinning on a core that other workers
// need for their reads. Destroyed with the owner. Move-only.
class CudaEvents {
 public:
  CudaEvents() = default;
  static StatusOr<CudaEvents> Create(size_t n);
  CudaEvents(CudaEvents&& o) noexcept { *this = std::move(o); }
  CudaEvents& operator=(CudaEvents&& o) noexcept;
  ~CudaEvents();
  cudaEvent_t operator[](size_t i) const { return events_[i]; }
  size_t size() const { return events_.size(); }

 private:
  void Reset();
  std::vector<cudaEvent_t> events_;
};

}  // namespace weightlift::internal
