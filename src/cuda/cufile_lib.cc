#include "cuda/cufile_lib.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include "util/errno_text.h"

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

namespace {

// cuFile's configuration for compatibility mode, forced (see Get).
constexpr const char* kCompatConfig =
    "{\n"
    "  \"logging\": {\"level\": \"ERROR\"},\n"
    "  \"properties\": {\"allow_compat_mode\": true,\n"
    "                 \"force_compat_mode\": true}\n"
    "}\n";

// Writes kCompatConfig to a new temporary file; its path, or empty.
std::string WriteCompatConfig(std::string* why) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") +
                     "/weightlift-cufile-XXXXXX.json";
  int fd = mkstemps(path.data(), 5);
  if (fd < 0) {
    *why = "cannot create " + path + ": " + ErrnoName(errno);
    return {};
  }
  const std::string text = kCompatConfig;
  const bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) {
    *why = "cannot write " + path;
    unlink(path.c_str());
    return {};
  }
  return path;
}

// Sets NAME to VALUE until destroyed, then restores what it was.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

StatusOr<CuFileLib*> CuFileLib::Get(bool compat) {
  static std::once_flag once;
  static CuFileLib* lib = nullptr;
  static Status* error = nullptr;
  static bool opened_compat = false;
  std::call_once(once, [compat] {
    opened_compat = compat;
    auto fail = [](std::string why) {
      error = new Status(Status::Unsupported(why));
    };
    std::string config;
    std::optional<ScopedEnv> env;
    if (compat) {
      std::string why;
      config = WriteCompatConfig(&why);
      if (config.empty()) {
        fail("GDS compatibility mode: " + why);
        return;
      }
      env.emplace("CUFILE_ENV_PATH_JSON", config);
    }
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
    l->compat_ = compat;
    l->config_path_ = config;
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
      fail(std::string("GDS unavailable: cuFileDriverOpen") +
           (compat ? " in compatibility mode (" + config + ")" : "") +
           " failed with " + CuFileErrorText(e));
      delete l;
      return;
    }
    lib = l;
    // Close the driver at exit; the library itself stays loaded.
    std::atexit([] {
      if (lib && lib->driver_close_) lib->driver_close_();
      if (lib && !lib->config_path_.empty()) {
        unlink(lib->config_path_.c_str());
      }
    });
  });
  if (compat != opened_compat) {
    return Status::Unsupported(
        std::string("cuFile was already opened in this process ") +
        (opened_compat ? "in compatibility mode (gds=compat)"
                       : "in its normal mode") +
        "; it reads its configuration once, so gds=" +
        (compat ? "compat" : "auto/on") + " needs a fresh process");
  }
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
