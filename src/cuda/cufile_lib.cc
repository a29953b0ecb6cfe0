#include "cuda/cufile_lib.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace weightlift::internal {

bool NvidiaFsLoaded() { return access("/proc/driver/nvidia-fs", F_OK) == 0; }

namespace {

std::string CuFileErrorText(CuFileError e) {
  return "cuFile error " + std::to_string(e.err) +
         (e.cu_err ? " (CUresult " + std::to_string(e.cu_err) + ")" : "");
}

template <typename F>
bool LoadSym(void* dl, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(dl, name));
  return *out != nullptr;
}

}  // namespace

StatusOr<CuFileLib*> CuFileLib::Get() {
  static std::once_flag once;
  static CuFileLib* lib = nullptr;
  static Status* error = nullptr;
  std::call_once(once, [] {
    auto fail = [](std::string why) {
      error = new Status(Status::Unsupported(why));
    };
    void* dl = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!dl) dl = dlopen("libcufile.so", RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
      const char* e = dlerror();
      fail(
          std::string("GDS unavailable: libcufile.so.0 could not be loaded (") +
          (e ? e : "unknown dlerror") + ")");
      return;
    }
    auto* l = new CuFileLib();
    l->dl_ = dl;
    bool ok = LoadSym(dl, "cuFileDriverOpen", &l->driver_open_) &&
              LoadSym(dl, "cuFileHandleRegister", &l->handle_register_) &&
              LoadSym(dl, "cuFileHandleDeregister", &l->handle_deregister_) &&
              LoadSym(dl, "cuFileRead", &l->read_);
    if (!LoadSym(dl, "cuFileDriverClose_v2", &l->driver_close_)) {
      LoadSym(dl, "cuFileDriverClose", &l->driver_close_);
    }
    if (!ok) {
      fail(
          "GDS unavailable: libcufile.so.0 lacks a required symbol "
          "(cuFileDriverOpen/HandleRegister/HandleDeregister/Read)");
      delete l;
      return;
    }
    CuFileError e = l->driver_open_();
    if (e.err != 0) {
      fail("GDS unavailable: cuFileDriverOpen failed with " +
           CuFileErrorText(e));
      delete l;
      return;
    }
    lib = l;
    // Close the driver at exit; the library itself stays loaded.
    std::atexit([] {
      if (lib && lib->driver_close_) lib->driver_close_();
    });
  });
  if (lib) return lib;
  return *error;
}

StatusOr<CuFileHandle> CuFileLib::RegisterFile(int fd,
                                               const std::string& path) {
  CuFileDescr d{};
  d.type = kCuFileHandleTypeOpaqueFd;
  d.handle.fd = fd;
  d.fs_ops = nullptr;
  CuFileHandle h = nullptr;
  CuFileError e = handle_register_(&h, &d);
  if (e.err != 0) {
    return Status::Unsupported(path +
                               ": cuFileHandleRegister refused the "
                               "file with " +
                               CuFileErrorText(e));
  }
  return h;
}

void CuFileLib::DeregisterFile(CuFileHandle h) {
  if (h) handle_deregister_(h);
}

Status CuFileLib::Read(CuFileHandle h, void* dev, size_t size,
                       uint64_t file_offset, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    size_t want = size - done;
    if (want > (1ull << 30)) want = 1ull << 30;
    ssize_t n = read_(h, dev, want, static_cast<off_t>(file_offset + done),
                      static_cast<off_t>(done));
    if (n <= 0) {
      return Status::IoError(
          path + ": cuFileRead at offset " +
          std::to_string(file_offset + done) + " length " +
          std::to_string(want) + " returned " + std::to_string(n) +
          (n < 0 ? " (negative: errno or cuFile error)" : " (end of file)"));
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace weightlift::internal
