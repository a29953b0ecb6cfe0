#include "device_baselines.h"

#if WL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "cuda/cuda_util.h"
#endif

namespace weightlift::bench {

#if WL_HAVE_CUDA
using internal::CheckCudaDevice;
using internal::Clock;
using internal::CudaStatus;
using internal::DeviceBuffer;
using internal::PinnedBuffer;
using internal::SecondsSince;
using internal::UseDevice;

StatusOr<double> MeasurePinnedCopyGBps(int device, uint64_t bytes) {
  WL_RETURN_IF_ERROR(CheckCudaDevice(device));
  WL_RETURN_IF_ERROR(UseDevice(device));
  constexpr uint64_t kPiece = 64ull << 20;
  bytes = std::max<uint64_t>(kPiece, bytes / kPiece * kPiece);
  WL_ASSIGN_OR_RETURN(PinnedBuffer host, PinnedBuffer::Allocate(bytes));
  std::memset(host.data(), 0x5a, bytes);  // fault in, not a zero page
  WL_ASSIGN_OR_RETURN(DeviceBuffer dev, DeviceBuffer::Allocate(device, bytes));
  cudaStream_t stream;
  WL_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                 "cudaStreamCreate"));
  std::vector<double> runs;
  Status st;
  for (int run = 0; run < 6 && st.ok(); ++run) {
    auto t0 = Clock::now();
    for (uint64_t o = 0; o < bytes && st.ok(); o += kPiece) {
      st = CudaStatus(cudaMemcpyAsync(dev.data() + o, host.data() + o, kPiece,
                                      cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync (pinned ceiling)");
    }
    if (st.ok()) {
      st = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    double s = SecondsSince(t0);
    if (run > 0) runs.push_back(bytes / s / 1e9);  // run 0 is the warm-up
  }
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  WL_RETURN_IF_ERROR(st);
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

StatusOr<double> NaiveMmapToDevice(const Checkpoint& ckpt, int device) {
  WL_RETURN_IF_ERROR(CheckCudaDevice(device));
  WL_RETURN_IF_ERROR(UseDevice(device));
  struct Map {
    void* p = MAP_FAILED;
    size_t len = 0;
    ~Map() {
      if (p != MAP_FAILED) munmap(p, len);
    }
  };
  std::vector<void*> buffers;
  auto free_all = [&] {
    for (void* b : buffers) cudaFree(b);
    buffers.clear();
  };
  auto t0 = Clock::now();
  std::vector<Map> maps(ckpt.files().size());
  for (size_t i = 0; i < maps.size(); ++i) {
    const FileInfo& f = ckpt.files()[i];
    int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IoErrorFromErrno(f.path + ": open", errno);
    if (f.size > 0) {
      maps[i].p = mmap(nullptr, f.size, PROT_READ, MAP_SHARED, fd, 0);
      int e = errno;
      close(fd);
      if (maps[i].p == MAP_FAILED) {
        return Status::IoErrorFromErrno(f.path + ": mmap", e);
      }
      maps[i].len = f.size;
    } else {
      close(fd);
    }
  }
  for (const TensorInfo& t : ckpt.tensors()) {
    if (t.size == 0) continue;
    void* d = nullptr;
    cudaError_t e = cudaMalloc(&d, t.size);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      free_all();
      return CudaStatus(e, "cudaMalloc for tensor '" + t.name + "'");
    }
    buffers.push_back(d);
    const std::byte* src =
        static_cast<const std::byte*>(maps[t.file].p) + t.offset;
    e = cudaMemcpy(d, src, t.size, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      free_all();
      return CudaStatus(e, "cudaMemcpy of tensor '" + t.name + "'");
    }
  }
  cudaDeviceSynchronize();
  double s = SecondsSince(t0);
  free_all();
  return s;
}

#else  // !WL_HAVE_CUDA

namespace {
constexpr const char* kNoCuda =
    "built without CUDA (the CUDA toolkit was not found at configure time)";
}

StatusOr<double> MeasurePinnedCopyGBps(int, uint64_t) {
  return Status::Unsupported(kNoCuda);
}

StatusOr<double> NaiveMmapToDevice(const Checkpoint&, int) {
  return Status::Unsupported(kNoCuda);
}

#endif  // WL_HAVE_CUDA

}  // namespace weightlift::bench
