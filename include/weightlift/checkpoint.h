// Checkpoint: the validated description of a safetensors checkpoint.
//
// Open() reads and validates every header (and the index of a sharded
// checkpoint) but never tensor data. Everything it returns has passed every
// rule in docs/format.md, so a loader can trust offsets and sizes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weightlift/dtype.h"
#include "weightlift/status.h"

namespace weightlift {

namespace internal {
class File;
struct HeldFiles;
class WarmMappings;
class PreparedPagesSlot;
}  // namespace internal

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint32_t file = 0;    // index into Checkpoint::files()
  uint64_t offset = 0;  // absolute byte offset in the file (8 + N + begin)
  uint64_t size = 0;    // bytes (end - begin)
  uint64_t num_elements() const;
};

struct FileInfo {
  std::string path;           // as opened (symlinks not resolved in the name)
  std::string resolved_path;  // realpath(path): where the bytes really are
  uint64_t size = 0;          // file size when the header was read
  uint64_t header_size = 0;   // N
  uint64_t data_offset = 0;   // 8 + N
  std::map<std::string, std::string> metadata;  // __metadata__
  // The header has a __metadata__ key; false when absent. Lets a caller
  // tell an empty {} from no key (safetensors returns {} vs None).
  bool has_metadata = false;
  // The path to open for the bytes: resolved_path, or path where it was
  // never resolved (a FileInfo made by hand).
  const std::string& open_path() const {
    return resolved_path.empty() ? path : resolved_path;
  }
};

class Checkpoint {
 public:
  // PATH may be: a .safetensors file; a model.safetensors.index.json; or a
  // directory holding either an index (used when present) or exactly the
  // *.safetensors files to load (then every one of them is loaded). A
  // location of a registered scheme ("s3://...") is read through its
  // storage. Every file stays open (shared by copies of the Checkpoint)
  // until the last copy goes, and loads read those open files: a file
  // changed or replaced after Open is an error, never a mix of two files.
  static StatusOr<Checkpoint> Open(const std::string& path);

  // Builds a checkpoint from already-parsed parts (tests, the writer).
  // REQUIRES: tensors sorted by (file, offset) and validated.
  Checkpoint(std::vector<FileInfo> files, std::vector<TensorInfo> tensors,
             std::string index_path = {});

  const std::vector<FileInfo>& files() const { return files_; }
  // Every tensor, sorted by (file, offset).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  // Index of NAME in tensors(), or -1.
  int64_t IndexOf(std::string_view name) const;
  uint64_t total_bytes() const { return total_bytes_; }
  // The index file, empty for a single file or a plain directory.
  const std::string& index_path() const { return index_path_; }
  // __metadata__ of the first file (what safetensors' metadata() returns).
  const std::map<std::string, std::string>& metadata() const;

 private:
  std::vector<FileInfo> files_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, uint32_t, std::less<>> by_name_;
  std::string index_path_;
  uint64_t total_bytes_ = 0;
  // The files Open read the headers from, held open for loads (one per
  // files(), or empty for a checkpoint built by hand). See
  // src/format/held_files.h.
  friend struct internal::HeldFiles;
  std::vector<std::shared_ptr<internal::File>> open_files_;
  // Row pages filled ahead of the next load (src/env/warm_mappings.h),
  // shared by copies; never null.
  std::shared_ptr<internal::WarmMappings> warm_;
  // Pages registered ahead of the next load (src/format/prepared_pages.h),
  // shared by copies; never null.
  std::shared_ptr<internal::PreparedPagesSlot> prepared_;
};

}  // namespace weightlift
