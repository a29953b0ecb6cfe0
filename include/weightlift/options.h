// LoadOptions: every knob of a load, with its default. Options are passed in;
// the library never reads environment variables or flags itself.
//
// Resolved in one place: the `weightlift` command's flags and Python's
// keyword arguments both go through SetLoadOption (one spelling of every
// knob and its values, sizes by ParseByteSize), and every loader starts with
// Validate. Each LoadReport carries the options it ran with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/byte_size.h"
#include "weightlift/status.h"

namespace weightlift {

struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;  // CUDA ordinal; 0 for cpu

  static Device Cpu() { return {}; }
  static Device Cuda(int index) { return {Kind::kCuda, index}; }
  // "cpu", "cuda", "cuda:N".
  static StatusOr<Device> Parse(std::string_view text);
  bool is_cuda() const { return kind == Kind::kCuda; }
  std::string ToString() const;
  bool operator==(const Device&) const = default;
};

// How bytes leave storage: the one backend enum of the library. src/env
// opens files with a concrete one; kAuto is the loader's, resolved per file
// in src/exec/open_files.cc. BackendName/ParseBackend are the one mapping of
// names.
enum class Backend {
  kAuto,    // per file: buffered pread if its pages are resident, else
            // O_DIRECT through io_uring (or O_DIRECT pread without liburing)
  kPread,   // buffered pread
  kDirect,  // pread with O_DIRECT
  kUring,   // io_uring with O_DIRECT and a deep queue
  kMmap,    // mmap + memcpy
};
std::string_view BackendName(Backend b);
StatusOr<Backend> ParseBackend(std::string_view text);

// GPUDirect Storage (cuFile). Only meaningful for CUDA devices.
enum class GdsMode {
  kAuto,  // use GDS only where the driver has a real direct path for the
          // file; otherwise (or on any cuFile refusal) the staging pipeline
  kOn,    // GDS or fail with Unsupported and the reason
  kOff,   // never touch cuFile
  // Every file through cuFile forced into its compatibility mode (POSIX
  // reads through cuFile's own bounce buffers; a generated cufile.json with
  // allow_compat_mode and force_compat_mode, named by CUFILE_ENV_PATH_JSON
  // while the driver opens). Runs the GDS code path where nvidia-fs is
  // absent, for tests; its speed says nothing about real GDS. Decided per
  // process: cuFile opened in one mode cannot switch (Unsupported).
  kCompat,
};
std::string_view GdsModeName(GdsMode m);
StatusOr<GdsMode> ParseGdsMode(std::string_view text);

// Zero-copy from the page cache for CUDA loads: mmap the resident file,
// cudaHostRegister it read-only in pieces, and copy straight from it.
enum class HostRegisterMode { kAuto, kOn, kOff };
std::string_view HostRegisterModeName(HostRegisterMode m);
StatusOr<HostRegisterMode> ParseHostRegisterMode(std::string_view text);

struct LoadOptions {
  Device device;  // cpu
  Backend backend = Backend::kAuto;
  GdsMode gds = GdsMode::kAuto;
  HostRegisterMode host_register = HostRegisterMode::kAuto;
  int threads = 0;                     // 0: by the kind of reads, see
                                       // src/exec/thread_count.h
  size_t chunk_bytes = 8u << 20;       // bytes per read request (8 MiB)
  size_t staging_bytes = 128u << 20;   // bounce / pinned staging, total
  int queue_depth = 16;                // io_uring reads in flight per thread
  size_t direct_min_bytes = 1u << 20;  // tensors smaller than this are
                                       // read through the bounce buffer
  int copy_streams = 0;                // CUDA streams; 0: one per thread
                                       // (one when local_world_size > 1)
  double resident_threshold = 0.9;     // auto: fraction of sampled pages in
                                       // the page cache to call a file warm
  // CUDA loads only (0 = the default tuned on the H200, see
  // src/cuda/cuda_loader.cc). The staging ring is staging_bytes split into
  // slots of cuda_chunk_bytes, an equal share per thread.
  size_t cuda_chunk_bytes = 0;           // one read = one staging slot
  size_t host_register_piece_bytes = 0;  // host-register: bytes per register
  // Host Load() only: freed destination buffers of up to 32 MiB are kept,
  // up to this many bytes in all, for the loader's next loads (saves the
  // first touch of fresh pages; see src/exec/host_buffer_cache.h). 0: none.
  size_t host_buffer_cache_bytes = 64u << 20;
  // Host Load() only: tensors are views of a private (copy-on-write) mapping
  // of each file instead of copies, as plain safetensors gives on cpu. Off
  // by default: the tensors then depend on the file (truncating it while
  // they live raises SIGBUS), see src/exec/mapped_load.h.
  bool zero_copy = false;
  // io_uring reads: the loader's bounce / staging memory is registered with
  // each ring (IORING_OP_READ_FIXED, no page pinning per read) for loads,
  // and files, of at least this many bytes. Registering pins the whole ring
  // once per io_uring ring (4-7 ms for 128 MiB on the development VM), which
  // pays off only over many reads; a refusal is not retried by the loader.
  // 0: always; SIZE_MAX: never.
  size_t uring_register_min_bytes = 256u << 20;
  // Processes loading at once on this host, e.g. tensor-parallel ranks
  // sharing one machine (torchrun's LOCAL_WORLD_SIZE; Python fills it from
  // that variable when it is not given). With threads = 0 the automatic
  // thread count divides the cores among them instead of every process
  // starting one thread per core; a CUDA loader's staging ring is its
  // share of staging_bytes (at least 2 slots per thread) and, with
  // copy_streams = 0, it copies on one stream (ranks sharing a GPU then
  // end together). The report says so. 1: this process alone.
  int local_world_size = 1;

  // InvalidArgument if a knob is out of range (names the knob and value).
  // The one check of the options: loaders call it before anything else.
  Status Validate() const;

  // The options in effect, one line: "backend auto, gds auto, ...", each
  // knob by its SetLoadOption name (device excluded: reports print it
  // first).
  std::string ToString() const;
};

// The knobs SetLoadOption knows, in the order ToString prints them:
// device, backend, gds, host_register, threads, chunk, cuda_chunk, staging,
// queue_depth, direct_min_bytes, copy_streams, resident_threshold,
// zero_copy, host_register_piece, host_buffer_cache, uring_register_min,
// local_world_size.
const std::vector<std::string_view>& LoadOptionNames();

// Sets the knob NAME (one of LoadOptionNames) of OPTIONS from VALUE as text,
// the one way the command's flags and Python's keyword arguments map onto
// LoadOptions:
//   device               "cpu", "cuda", "cuda:N"
//   backend              auto | pread | direct | uring | mmap
//   gds, host_register   auto | on | off
//   zero_copy            true | false (also on/off, 1/0)
//   threads, queue_depth, copy_streams   a decimal integer (0: auto)
//   local_world_size     a decimal integer, 1 to 1024
//   resident_threshold   a decimal fraction, 0 to 1
//   chunk                bytes per read (ParseByteSize); for CUDA devices
//                        also the staging slot (sets chunk_bytes and
//                        cuda_chunk_bytes, whatever the device)
//   cuda_chunk           cuda_chunk_bytes alone (0: the tuned default)
//   staging, direct_min_bytes, host_register_piece, host_buffer_cache,
//   uring_register_min   byte counts (ParseByteSize)
// InvalidArgument naming the knob on an unknown name or a value that does
// not parse. Ranges are Validate's job, after every knob is set.
Status SetLoadOption(LoadOptions& options, std::string_view name,
                     std::string_view value);

}  // namespace weightlift
