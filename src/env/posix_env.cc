// The POSIX Env (Env::Default), the scheme registry (EnvForLocation) and
// the Env helpers built on the virtual functions.
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>
#include <mutex>

#include "env/backends.h"
#include "env/env.h"

namespace weightlift::internal {

namespace {

// Writes to "PATH.tmp" and renames it over PATH on Close.
class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, std::string tmp, UniqueFd fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(std::move(fd)) {}
  ~PosixWritableFile() override {
    if (!published_) {
      fd_ = UniqueFd();
      ::unlink(tmp_.c_str());
    }
  }

  Status Append(std::span<const std::byte> data) override {
    if (fd_.get() < 0) {
      return Status::InvalidArgument("file '" + path_ + "' is closed");
    }
    WL_RETURN_IF_ERROR(WriteFully(fd_.get(), tmp_, offset_, data));
    offset_ += data.size();
    return Status::OK();
  }

  Status Close() override {
    if (fd_.get() < 0) {
      return Status::InvalidArgument("file '" + path_ + "' is closed");
    }
    if (::close(fd_.release()) != 0) {
      return Status::IoErrorFromErrno("close failed for '" + tmp_ + "'", errno);
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Status::IoErrorFromErrno(
          "cannot rename '" + tmp_ + "' to '" + path_ + "'", errno);
    }
    published_ = true;
    return Status::OK();
  }

  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::string tmp_;
  UniqueFd fd_;
  uint64_t offset_ = 0;
  bool published_ = false;
};

class PosixEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<File>> OpenForRead(
      const std::string& location, Backend backend,
      const IoOptions& options) override {
    WL_ASSIGN_OR_RETURN(
        PosixHandle h,
        OpenPosixHandle(location, NeedsDirect(backend), BackendName(backend)));
    return MakePosixFile(std::move(h), backend, options);
  }

  StatusOr<FileStat> Stat(const std::string& location) override {
    FileStat out;
    WL_ASSIGN_OR_RETURN(out.identity,
                        StatIdentity(location, &out.is_directory));
    char* real = ::realpath(location.c_str(), nullptr);
    if (real == nullptr) {
      return Status::IoErrorFromErrno("realpath failed for '" + location + "'",
                                      errno);
    }
    out.resolved = real;
    ::free(real);
    return out;
  }

  StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& location) override {
    DIR* d = ::opendir(location.c_str());
    if (d == nullptr) {
      const int err = errno;
      if (err == ENOENT) {
        return Status::NotFound("'" + location + "': no such directory");
      }
      return Status::IoErrorFromErrno(
          "cannot list directory '" + location + "'", err);
    }
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* e = ::readdir(d)) {
      const std::string_view n = e->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
      errno = 0;
    }
    const int err = errno;
    ::closedir(d);
    if (err != 0) {
      return Status::IoErrorFromErrno(
          "cannot list directory '" + location + "'", err);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& location) override {
    std::string tmp = location + ".tmp";
    int raw;
    do {
      raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } while (raw < 0 && errno == EINTR);
    if (raw < 0) {
      return Status::IoErrorFromErrno("cannot open '" + tmp + "' for writing",
                                      errno);
    }
    return std::unique_ptr<WritableFile>(
        new PosixWritableFile(location, std::move(tmp), UniqueFd(raw)));
  }
};

struct Registry {
  std::mutex mu;
  std::map<std::string, EnvFactory, std::less<>> factories;
  std::map<std::string, std::unique_ptr<Env>, std::less<>> made;
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: Envs outlive main
  return *r;
}

// "s3" for "s3://b/k"; empty for a plain path. A scheme is a letter then
// letters, digits, '+', '-' or '.' (RFC 3986), directly before "://".
std::string_view SchemeOf(std::string_view location) {
  const size_t colon = location.find("://");
  if (colon == std::string_view::npos || colon == 0) return {};
  const std::string_view s = location.substr(0, colon);
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) return {};
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' &&
        c != '.') {
      return {};
    }
  }
  return s;
}

}  // namespace

std::string Env::Join(const std::string& dir, const std::string& name) const {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string Env::Parent(const std::string& location) const {
  const size_t slash = location.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return location.substr(0, slash);
}

StatusOr<bool> Env::IsDirectory(const std::string& location) {
  WL_ASSIGN_OR_RETURN(FileStat st, Stat(location));
  return st.is_directory;
}

StatusOr<std::vector<std::byte>> Env::ReadSmallFile(const std::string& location,
                                                    uint64_t max_bytes,
                                                    FormatError too_large) {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      OpenForRead(location, Backend::kPread));
  if (f->size() > max_bytes) {
    return Status::Corruption(too_large, location + ": " +
                                             std::to_string(f->size()) +
                                             " bytes, more than the limit of " +
                                             std::to_string(max_bytes));
  }
  std::vector<std::byte> bytes(f->size());
  WL_RETURN_IF_ERROR(f->ReadAt(0, bytes));
  return bytes;
}

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed
  return env;
}

void RegisterEnv(std::string scheme, EnvFactory factory) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[std::move(scheme)] = std::move(factory);
}

StatusOr<Env*> EnvForLocation(std::string_view location) {
  const std::string_view scheme = SchemeOf(location);
  if (scheme.empty()) return Env::Default();
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.made.find(scheme); it != r.made.end()) {
    return it->second.get();
  }
  auto f = r.factories.find(scheme);
  if (f == r.factories.end()) {
    return Status::Unsupported("'" + std::string(location) +
                               "': no storage is registered for scheme '" +
                               std::string(scheme) + "://' in this build");
  }
  WL_ASSIGN_OR_RETURN(std::unique_ptr<Env> env, f->second());
  Env* out = env.get();
  r.made.emplace(std::string(scheme), std::move(env));
  return out;
}

Status CheckUnchangedAt(Env& env, const File& f) {
  WL_RETURN_IF_ERROR(CheckUnchanged(f));
  StatusOr<FileStat> now = env.Stat(f.path());
  if (!now.ok()) {
    if (now.status().code() == StatusCode::kNotFound) {
      return Status::IoError("file '" + f.path() +
                             "' changed since it was opened: removed");
    }
    return now.status().WithContext("checking that file '" + f.path() +
                                    "' is unchanged");
  }
  const std::string change =
      DescribeIdentityChange(f.identity(), now->identity);
  if (change.empty()) return Status::OK();
  return Status::IoError("file '" + f.path() +
                         "' changed since it was opened: " + change);
}

StatusOr<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         Backend backend,
                                         const IoOptions& options) {
  return Env::Default()->OpenForRead(path, backend, options);
}

}  // namespace weightlift::internal
