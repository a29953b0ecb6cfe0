#include "exec/mapped_load.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "env/mapping.h"
#include "exec/open_files.h"
#include "exec/request.h"
#include "format/held_files.h"
#include "util/clock.h"

namespace weightlift::internal {
namespace {

// Every mapping of one load plus the owned copies of misaligned tensors;
// the LoadedTensor owner of every tensor of that load.
struct MappedFiles {
  std::vector<Mapping> maps;  // one per file of the checkpoint (may be empty)
  std::vector<void*> copies;  // std::aligned_alloc'd
  // Where empty tensors point: valid, aligned, never read.
  alignas(64) std::byte empty[64] = {};
  ~MappedFiles() {
    for (void* p : copies) std::free(p);
  }
};

// Maps file I of CKPT privately (read + copy-on-write), from the file the
// checkpoint holds open (checked unchanged by OpenForLoad).
Status MapFile(const Checkpoint& ckpt, uint32_t i, Mapping* out) {
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      OpenForLoad(ckpt, i, Backend::kPread, {}));
  StatusOr<Mapping> m = f->Map(0, f->size(), MapAccess::kPrivateWritable);
  if (!m.ok()) return m.status().WithContext("zero_copy");
  // Starts readahead of a cold file now, so first touches find pages.
  m->AdviseWillNeed();
  *out = std::move(*m);
  return Status::OK();
}

}  // namespace

StatusOr<LoadResult> LoadMapped(const Checkpoint& ckpt,
                                const std::vector<uint32_t>& tensors) {
  const auto t0 = Clock::now();
  LoadResult result;
  LoadReport& report = result.report;
  report.device = Device::Cpu();
  auto owner = std::make_shared<MappedFiles>();
  owner->maps.resize(ckpt.files().size());
  const std::vector<bool> needed = FilesNeeded(ckpt, tensors);
  for (size_t i = 0; i < ckpt.files().size(); ++i) {
    FileReport fr;
    fr.path = ckpt.files()[i].path;
    if (!needed[i]) {
      fr.path_taken = "none";
      fr.reason = "no requested tensor in this file";
    } else {
      WL_RETURN_IF_ERROR(
          MapFile(ckpt, static_cast<uint32_t>(i), &owner->maps[i]));
      fr.path_taken = "mmap-view";
      fr.reason =
          "zero_copy: tensors are views of a private (copy-on-write) "
          "mapping; pages are read when first touched";
    }
    report.files.push_back(std::move(fr));
  }
  report.open_seconds = SecondsSince(t0);

  std::vector<uintptr_t> dsts(tensors.size());
  uint64_t copied = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorInfo& ti = ckpt.tensors()[tensors[k]];
    report.files[ti.file].bytes += ti.size;
    report.bytes += ti.size;
    const Mapping& m = owner->maps[ti.file];
    // Checkpoint::Open checked offset + size against the file size, which
    // MapFile re-checked, so this stays inside the mapping.
    const uintptr_t at = reinterpret_cast<uintptr_t>(m.data()) + ti.offset;
    const int bits = DTypeBits(ti.dtype);
    const uintptr_t elem = bits >= 8 ? static_cast<uintptr_t>(bits / 8) : 1;
    if (ti.size == 0) {
      dsts[k] = reinterpret_cast<uintptr_t>(owner->empty);
      continue;
    }
    if (at % elem == 0) {
      dsts[k] = at;
      continue;
    }
    // Misaligned for its dtype: an owned copy, 64-byte aligned as the
    // copying Load() gives.
    void* copy = std::aligned_alloc(64, (ti.size + 63) / 64 * 64);
    if (copy == nullptr) {
      return Status::ResourceExhausted(
          "zero_copy: cannot allocate " + std::to_string(ti.size) +
          " bytes for misaligned tensor '" + ti.name + "'");
    }
    owner->copies.push_back(copy);
    std::memcpy(copy, reinterpret_cast<const void*>(at), ti.size);
    dsts[k] = reinterpret_cast<uintptr_t>(copy);
    copied += ti.size;
  }
  if (copied > 0) {
    report.notes.push_back(std::to_string(owner->copies.size()) + " tensors (" +
                           std::to_string(copied) +
                           " bytes) are misaligned for their dtype in the "
                           "file and were copied instead of mapped");
  }
  report.bytes_read = copied;
  report.tensors = tensors.size();
  result.tensors =
      MakeLoadedSelections(ckpt, WholeTensors(ckpt, tensors), Device::Cpu(),
                           dsts, std::shared_ptr<void>(owner, owner.get()));
  report.seconds = SecondsSince(t0);
  report.transfer_seconds = report.seconds - report.open_seconds;
  return result;
}

}  // namespace weightlift::internal
