// mmap + memcpy: the file is mapped once, read-only and shared, and each
// ReadAt copies out of the mapping (page faults fill the page cache).
//
// A file that shrinks while mapped turns reads of the lost pages into
// SIGBUS. Before each copy the size is re-checked with fstat, so a file
// truncated before the read is an IoError. Known remaining race: a file
// truncated between that fstat and the end of the memcpy still raises
// SIGBUS; closing it would need a SIGBUS handler, which a library must not
// install behind its host's back. Use pread-based backends for files that
// other processes may rewrite during a load.
#include <algorithm>
#include <cstring>

#include "env/backends.h"
#include "env/mapped_rows_file.h"

namespace weightlift::internal {
namespace {

class MmapFile final : public PosixFile {
 public:
  MmapFile(PosixHandle h, Mapping mapping)
      : PosixFile(std::move(h)), mapping_(std::move(mapping)) {}

  Status ReadAt(uint64_t offset, std::span<std::byte> dst) override {
    WL_RETURN_IF_ERROR(CheckReadArgs(path(), size(), 1, offset, dst));
    if (dst.empty()) return Status::OK();
    WL_ASSIGN_OR_RETURN(uint64_t now, FdSize(fd(), path()));
    if (now < offset + dst.size()) {
      return Status::IoError("file shrank to " + std::to_string(now) +
                             " bytes since it was opened (truncated?): " +
                             DescribeRange(path(), offset, dst.size()));
    }
    std::memcpy(dst.data(), mapping_.data() + offset, dst.size());
    return Status::OK();
  }
  // One size check per call, not per run, so a file that shrank before is
  // an IoError, not a SIGBUS. The copies fault the pages in: cheaper than
  // populating them first (mapped_rows_file.h).
  Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                  uint64_t rows, std::byte* dst) override {
    if (rows <= 1 || width == 0) {
      return File::ReadRows(offset, pitch, width, rows, dst);
    }
    if (rows > size() / std::max<uint64_t>(pitch, 1) + 1 || offset > size() ||
        (rows - 1) * pitch + width > size() - offset) {
      return File::ReadRows(offset, pitch, width, rows, dst);  // names it
    }
    const uint64_t cover = (rows - 1) * pitch + width;
    WL_ASSIGN_OR_RETURN(uint64_t now, FdSize(fd(), path()));
    if (now < offset + cover) return ShrankUnderMapping(path(), offset, cover);
    CopyRows(mapping_.data() + offset, pitch, width, rows, dst);
    return Status::OK();
  }
  std::string_view backend_name() const override {
    return BackendName(Backend::kMmap);
  }

 private:
  Mapping mapping_;  // the whole file
};

}  // namespace

StatusOr<std::unique_ptr<File>> MakeMmapFile(PosixHandle h, const IoOptions&) {
  WL_ASSIGN_OR_RETURN(Mapping m, Mapping::OfDescriptor(h.fd.get(), h.path, 0,
                                                       h.identity.size, false));
  // Copies walk the mapping in order; ask for aggressive read-ahead.
  m.AdviseSequential();
  return std::unique_ptr<File>(new MmapFile(std::move(h), std::move(m)));
}

}  // namespace weightlift::internal
