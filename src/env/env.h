// Env: the storage layer (leveldb's idea). The only code that asks the
// operating system (or, later, the network) for files.
//
// A location names a file or a directory: a POSIX path today; "s3://bucket/
// key" and "https://host/path" are served by the Envs that register those
// schemes (src/env/object/). Callers get the Env for a location with
// EnvForLocation and never make file system calls themselves.
//
// Thread safety: every method of an Env may be called from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "env/file.h"
#include "weightlift/format_error.h"
#include "weightlift/status.h"

namespace weightlift::internal {

// What Env::Stat reports about a location.
struct FileStat {
  FileIdentity identity;
  bool is_directory = false;
  // Where the bytes really are: POSIX realpath (symlinks resolved); the
  // location itself for storage without links.
  std::string resolved;
};

// A file being written. Bytes go in order with Append; Close makes the whole
// file appear at its location at once (POSIX: a temporary file renamed over
// it; object storage: the upload completed), so a reader never sees half a
// file. Destroyed without a successful Close, nothing appears and whatever
// was written is removed.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends DATA (loops over short writes and EINTR). Errors name the
  // location, offset and length. Not thread-safe: one writer at a time.
  virtual Status Append(std::span<const std::byte> data) = 0;
  // Flushes and publishes the file. After an error nothing was published.
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // Opens LOCATION for reading through BACKEND. The File holds the file open
  // until it is destroyed: a file renamed over LOCATION later is not read.
  // NotFound when it does not exist; InvalidArgument when it is not a
  // regular file (a directory) or BACKEND is kAuto (a loader's choice, made
  // before it asks); Unsupported (with the reason) when BACKEND cannot
  // serve it; IoError with errno otherwise.
  virtual StatusOr<std::unique_ptr<File>> OpenForRead(
      const std::string& location, Backend backend,
      const IoOptions& options = {}) = 0;

  // The identity of LOCATION now, following symlinks. NotFound when absent.
  virtual StatusOr<FileStat> Stat(const std::string& location) = 0;

  // The names (not locations) of the entries of directory LOCATION, sorted;
  // Join(LOCATION, name) gives each one's location.
  virtual StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& location) = 0;

  // Starts writing LOCATION (see WritableFile).
  virtual StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& location) = 0;

  // The location of NAME inside directory DIR ("a/b" + "c" = "a/b/c").
  virtual std::string Join(const std::string& dir,
                           const std::string& name) const;
  // The directory holding LOCATION ("a/b/c" -> "a/b"; "c" -> ".").
  virtual std::string Parent(const std::string& location) const;

  // Helpers built on the above.
  StatusOr<bool> IsDirectory(const std::string& location);
  // Reads all of LOCATION when it has at most MAX_BYTES; a longer file is
  // Corruption TOO_LARGE naming its size (for index.json, headers).
  StatusOr<std::vector<std::byte>> ReadSmallFile(const std::string& location,
                                                 uint64_t max_bytes,
                                                 FormatError too_large);

  // The POSIX Env (paths). Never null; lives for the whole process.
  static Env* Default();
};

// The Env serving LOCATION: the one registered for its scheme ("s3" for
// "s3://..."), else Env::Default() for a plain path. Unsupported, naming the
// scheme, for a "scheme://" nobody registered.
StatusOr<Env*> EnvForLocation(std::string_view location);

// Makes FACTORY serve locations "SCHEME://...". The Env is made on first use
// and lives for the whole process. Registering a scheme again replaces the
// factory for later first uses. Call it from code the program runs (a static
// initializer in a static library may be dropped by the linker).
using EnvFactory = std::function<StatusOr<std::unique_ptr<Env>>()>;
void RegisterEnv(std::string scheme, EnvFactory factory);

// OK when F is unchanged since it was opened (CheckUnchanged) and its
// location, looked up in ENV now, still names the same file; else IoError
// "file '...' changed since it was opened: <what>" (replaced by another
// file, size a -> b, modified, removed). Loaders call it for every file
// before their first read and after their last.
Status CheckUnchangedAt(Env& env, const File& f);

// Env::Default()->OpenForRead(PATH, BACKEND, OPTIONS).
StatusOr<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         Backend backend,
                                         const IoOptions& options = {});

}  // namespace weightlift::internal
