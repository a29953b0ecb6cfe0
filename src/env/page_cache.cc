#include "env/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "env/env.h"
#include "env/io_util.h"

namespace weightlift::internal {

StatusOr<Residency> SampleResidency(const File& file,
                                    const ResidencyOptions& options) {
  const std::string& path = file.path();
  WL_ASSIGN_OR_RETURN(FileIdentity now, file.Stat());
  const uint64_t size = now.size;
  Residency r;
  if (size == 0) {
    r.fraction = 1;
    return r;
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // Mapping touches no page; mincore then asks the kernel which are cached.
  StatusOr<Mapping> mapped = file.Map(0, size, MapAccess::kReadShared);
  if (!mapped.ok()) return mapped.status().WithContext("residency");
  std::byte* base = mapped->data();
  const uint64_t pages = (size + page - 1) / page;
  const int windows = std::max(1, options.windows);
  const uint64_t window_pages =
      std::max<uint64_t>(1, options.window_bytes / page);
  std::vector<unsigned char> vec;
  Status status;
  auto count = [&](uint64_t first, uint64_t n) {
    vec.resize(n);
    if (::mincore(base + first * page, n * page, vec.data()) != 0) {
      status = Status::IoErrorFromErrno(
          "residency: mincore failed for '" + path + "'", errno);
      return;
    }
    r.sampled_pages += n;
    for (unsigned char v : vec) r.resident_pages += v & 1;
  };
  if (pages <= window_pages * static_cast<uint64_t>(windows)) {
    count(0, pages);
    r.windows = 1;
  } else {
    // Window i starts at i/(windows-1) of the way through the file, so the
    // first and last pages are always sampled.
    const uint64_t span = pages - window_pages;
    for (int i = 0; i < windows && status.ok(); ++i) {
      const uint64_t first = windows == 1
                                 ? 0
                                 : span * static_cast<uint64_t>(i) /
                                       static_cast<uint64_t>(windows - 1);
      count(first, window_pages);
    }
    r.windows = windows;
  }
  WL_RETURN_IF_ERROR(status);
  r.fraction = r.sampled_pages == 0 ? 1.0
                                    : static_cast<double>(r.resident_pages) /
                                          static_cast<double>(r.sampled_pages);
  return r;
}

StatusOr<Residency> SampleResidency(const std::string& path,
                                    const ResidencyOptions& options) {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      Env::Default()->OpenForRead(path, Backend::kPread));
  return SampleResidency(*f, options);
}

bool OnMemoryFileSystem(const File& file) {
  struct statfs s;
  if (file.native_fd() < 0 || ::fstatfs(file.native_fd(), &s) != 0) {
    return false;
  }
  return s.f_type == 0x01021994 /*TMPFS_MAGIC*/ ||
         s.f_type == static_cast<decltype(s.f_type)>(0x858458f6) /*RAMFS*/;
}

Status EvictFromPageCache(const std::string& path) {
  WL_ASSIGN_OR_RETURN(UniqueFd fd, OpenReadOnly(path, 0, "evict"));
  // Dirty pages are not dropped by DONTNEED; write them back first. A
  // read-only descriptor may fdatasync on Linux.
  if (::fdatasync(fd.get()) != 0 && errno != EINVAL && errno != EROFS) {
    return Status::IoErrorFromErrno(
        "evict: fdatasync failed for '" + path + "'", errno);
  }
  const int rc = ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) {
    return Status::IoErrorFromErrno(
        "evict: posix_fadvise(DONTNEED) failed for '" + path + "'", rc);
  }
  return Status::OK();
}

}  // namespace weightlift::internal
