// Loader: runs a checkpoint's tensors into host or device memory.
//
//   auto ckpt = weightlift::Checkpoint::Open("model_dir");
//   auto loader = weightlift::Loader::Create(options);
//   auto result = (*loader)->Load(*ckpt);      // loader-owned memory
//   // or (*loader)->LoadInto(*ckpt, dests);   // the caller's memory
//
// A Loader allocates its staging memory once and reuses it for every load.
// One load runs at a time per Loader (calls are serialized by a mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/report.h"
#include "weightlift/request.h"
#include "weightlift/status.h"

namespace weightlift {

// One loaded tensor. `data` points into host memory (device cpu) or device
// memory (device cuda:N). `owner` keeps that memory alive: copy it along with
// the pointer and the memory outlives the loader and the LoadResult.
struct LoadedTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  Device device;
  void* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<void> owner;
};

struct LoadResult {
  std::vector<LoadedTensor> tensors;  // in the order requested
  LoadReport report;
  const LoadedTensor* Find(std::string_view name) const;
};

// A caller-provided destination: `size` must equal the tensor's byte size.
// `data` is host memory for cpu loads and device memory for cuda loads.
struct Destination {
  std::string name;
  void* data = nullptr;
  uint64_t size = 0;
};

struct LoadCallbacks {
  // Called once per tensor as soon as all its bytes are at their destination
  // (for CUDA: the copy has completed on the device). Called from loader
  // threads, possibly concurrently; must not block for long. `index` is the
  // tensor's position in the request (LoadResult::tensors / dests).
  std::function<void(size_t index, const TensorInfo& tensor)> on_ready;
  // Progress in bytes delivered; called from loader threads, at most every
  // 50 ms, never two calls at once, `done` growing from call to call. A
  // load that succeeds ends with one call (total, total) after every byte
  // has arrived; a failed load may stop before it.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // When set: once it reads true, the load takes no more reads, waits for
  // those in flight, and fails with Cancelled. Read between reads (each at
  // most a staging slot or a chunk of a few MiB), so a load running in
  // another thread ends soon after the caller sets it. Must outlive the load.
  const std::atomic<bool>* cancel = nullptr;
};

class Loader {
 public:
  // Validates options and allocates staging memory for options.device.
  // A CUDA device on a build or machine without CUDA is Unsupported / a
  // CudaError naming the reason.
  static StatusOr<std::unique_ptr<Loader>> Create(const LoadOptions& options);
  virtual ~Loader() = default;

  // Loads NAMES (every tensor when empty) into memory the loader allocates:
  // device tensors aligned to 256 bytes; host tensors to 64 bytes, except
  // those of a file read with O_DIRECT, which are laid out as in the file
  // (the address congruent to the file offset modulo 4096, so the reads
  // land in place): aligned as their file offset, at least to their element
  // size. On error every allocation of this call is freed and no tensor is
  // returned.
  virtual StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                                    std::span<const std::string> names = {},
                                    const LoadCallbacks& callbacks = {}) = 0;

  // Loads REQUESTS (whole tensors or slices, see request.h) into memory the
  // loader allocates, as Load() does; result tensor k is request k, with
  // the slice's shape, C-contiguous. A tensor may be requested more than
  // once. Only the selected bytes are read, or where that means many small
  // reads, a covering range placed with strided copies; the report's notes
  // say which and what it cost. on_ready gets the request index.
  virtual StatusOr<LoadResult> LoadSlices(
      const Checkpoint& ckpt, std::span<const TensorRequest> requests,
      const LoadCallbacks& callbacks = {}) = 0;

  // Fills the caller's destinations in place. On error the destinations'
  // contents are unspecified and the status says what failed.
  virtual Status LoadInto(const Checkpoint& ckpt,
                          std::span<const Destination> dests,
                          LoadReport* report = nullptr,
                          const LoadCallbacks& callbacks = {}) = 0;

  // LoadSlices into the caller's memory: request k (a whole tensor or a
  // slice, as LoadSlices reads it) lands C-contiguous at DESTS[k].data,
  // whose size must equal the selection's bytes (DESTS[k].name is not
  // read: the request names the tensor). Lets a caller take the memory
  // from its own allocator (PyTorch's caching allocator instead of a
  // cudaMalloc per call). On error the destinations' contents are
  // unspecified and the status says what failed.
  virtual Status LoadSlicesInto(const Checkpoint& ckpt,
                                std::span<const TensorRequest> requests,
                                std::span<const Destination> dests,
                                LoadReport* report = nullptr,
                                const LoadCallbacks& callbacks = {}) = 0;

  virtual const LoadOptions& options() const = 0;

  // The seconds Create took, unless a load already reported them; the next
  // load then reports none. A loader made ahead of its loads (a server
  // makes it while it builds its model) takes them, so that its first
  // load's report does not count a setup that load did not wait for.
  virtual double TakeSetupSeconds() = 0;
};

}  // namespace weightlift
