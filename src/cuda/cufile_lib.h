// GPUDirect Storage through libcufile.so.0, loaded with dlopen at run time
// (never linked, no cufile.h needed). Declares only the few ABI types and
// entry points weightlift uses, from NVIDIA's documented C ABI.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "weightlift/status.h"

namespace weightlift::internal {

// --- The documented cuFile C ABI (subset) ----------------------------------
struct CuFileError {  // CUfileError_t
  int err;            // CUfileOpError; 0 is CU_FILE_SUCCESS
  int cu_err;         // CUresult
};
using CuFileHandle = void*;  // CUfileHandle_t
inline constexpr int kCuFileHandleTypeOpaqueFd = 1;
struct CuFileDescr {  // CUfileDescr_t
  int type;           // CUfileFileHandleType
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;  // const CUfileFSOps_t*; null for regular files
};

// True when the nvidia-fs kernel module is loaded (the direct path of GDS
// on most machines): /proc/driver/nvidia-fs exists.
bool NvidiaFsLoaded();

// The process-wide libcufile: dlopen'ed on first use, driver opened once and
// closed at exit. Thread-safe.
class CuFileLib {
 public:
  // The library with its driver open, or Unsupported naming why (library
  // missing, symbol missing, cuFileDriverOpen error code). Opening the driver
  // may touch every GPU, so call this only when GDS is really going to be
  // tried. The result (success or failure) is cached for the process.
  //
  // COMPAT: open the driver in cuFile's compatibility mode, forced: a
  // cufile.json with properties.allow_compat_mode and force_compat_mode is
  // written to a temporary file and named by CUFILE_ENV_PATH_JSON while the
  // library loads and the driver opens (the previous value is restored
  // after). The first call decides the mode; a later call asking for the
  // other one is Unsupported (cuFile reads its configuration once).
  static StatusOr<CuFileLib*> Get(bool compat = false);
  // Whether the driver was opened in compatibility mode, and the
  // configuration file that asked for it (empty otherwise).
  bool compat() const { return compat_; }
  const std::string& config_path() const { return config_path_; }

  // Registers an fd opened with O_DIRECT. Unsupported naming the cuFile
  // error code (e.g. 5027 when the file system has no direct path).
  StatusOr<CuFileHandle> RegisterFile(int fd, const std::string& path);
  void DeregisterFile(CuFileHandle h);
  // Reads SIZE bytes at FILE_OFFSET into device memory DEV. Loops until done;
  // an error or a zero return is an IoError naming the path and offset.
  Status Read(CuFileHandle h, void* dev, size_t size, uint64_t file_offset,
              const std::string& path);

 private:
  CuFileLib() = default;
  bool compat_ = false;
  std::string config_path_;
  void* dl_ = nullptr;
  CuFileError (*driver_open_)() = nullptr;
  CuFileError (*driver_close_)() = nullptr;
  CuFileError (*handle_register_)(CuFileHandle*, CuFileDescr*) = nullptr;
  void (*handle_deregister_)(CuFileHandle) = nullptr;
  ssize_t (*read_)(CuFileHandle, void*, size_t, off_t, off_t) = nullptr;
};

}  // namespace weightlift::internal
