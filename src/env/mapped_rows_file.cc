#include "env/mapped_rows_file.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "env/forwarding_file.h"
#include "env/io_util.h"

namespace weightlift::internal {
namespace {

class RowsFromMappingFile final : public ForwardingFile {
 public:
  RowsFromMappingFile(std::unique_ptr<File> base, Mapping made)
      : ForwardingFile(std::move(base)) {
    if (!made.empty()) {
      map_ = std::move(made);
      mapped_.store(kMapped, std::memory_order_release);
    }
  }
  // The load that made the mapping is done with it when its files close;
  // tearing down the page tables its row runs filled is not that load's
  // time (Mapping::ResetInBackground).
  ~RowsFromMappingFile() override { map_.ResetInBackground(); }

  Status ReadRows(uint64_t offset, uint64_t pitch, uint64_t width,
                  uint64_t rows, std::byte* dst) override {
    if (rows <= 1 || width == 0 || pitch > kMappedRowsMaxPitch) {
      return inner().ReadRows(offset, pitch, width, rows, dst);
    }
    // pitch <= kMappedRowsMaxPitch (64 KiB): no overflow for any row count
    // a file can hold.
    const uint64_t cover = (rows - 1) * pitch + width;
    if (rows > size() / pitch + 1 || offset > size() ||
        cover > size() - offset) {
      // Past the end: the base's reads name the run that fails.
      return inner().ReadRows(offset, pitch, width, rows, dst);
    }
    const Mapping* map = WholeFile();
    if (map == nullptr)
      return inner().ReadRows(offset, pitch, width, rows, dst);
    // A page past the end of the file now would raise SIGBUS in the copy.
    WL_ASSIGN_OR_RETURN(FileIdentity now, inner().Stat());
    if (now.size < offset + cover) {
      return ShrankUnderMapping(path(), offset, cover);
    }
    CopyRows(map->data() + offset, pitch, width, rows, dst);
    runs_.fetch_add(rows, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }

  // Row runs are copies out of the mapping: no read each.
  uint64_t read_cost_bytes() const override { return 0; }
  CopiedRows copied_rows() const override {
    return {runs_.load(std::memory_order_relaxed),
            calls_.load(std::memory_order_relaxed)};
  }
  std::string Degraded() const override {
    std::string s = inner().Degraded();
    auto add = [&s](const std::string& line) {
      s += (s.empty() ? "" : "; ") + line;
    };
    if (mapped_.load(std::memory_order_acquire) == kRefused) {
      add("row runs read one " + std::string(inner().backend_name()) +
          " each: the file cannot be mapped (" + refusal_ + ")");
    }
    return s;
  }

 private:
  enum : int { kNotYet = 0, kMapped = 1, kRefused = 2 };

  // The whole file's mapping, made by the first caller (the others wait
  // for it); null when the file cannot be mapped.
  const Mapping* WholeFile() {
    const int state = mapped_.load(std::memory_order_acquire);
    if (state != kNotYet) return state == kMapped ? &map_ : nullptr;
    std::lock_guard<std::mutex> lock(map_mu_);
    if (mapped_.load(std::memory_order_relaxed) == kNotYet) {
      StatusOr<Mapping> m = inner().Map(0, size(), MapAccess::kReadShared);
      if (m.ok()) {
        map_ = std::move(*m);
        mapped_.store(kMapped, std::memory_order_release);
      } else {
        refusal_ = m.status().message();
        mapped_.store(kRefused, std::memory_order_release);
      }
    }
    return mapped_.load(std::memory_order_relaxed) == kMapped ? &map_ : nullptr;
  }

  std::mutex map_mu_;  // guards making map_ (once)
  std::atomic<int> mapped_{kNotYet};
  Mapping map_;          // written once under map_mu_, before kMapped
  std::string refusal_;  // written once under map_mu_, before kRefused
  std::atomic<uint64_t> runs_{0}, calls_{0};
};

}  // namespace

std::unique_ptr<File> WithRowsFromMapping(std::unique_ptr<File> base,
                                          Mapping made) {
  if (!made.empty() && made.size() != base->size()) made.ResetInBackground();
  return std::make_unique<RowsFromMappingFile>(std::move(base),
                                               std::move(made));
}

int PopulateRuns(const Mapping& map, uint64_t map_offset, uint64_t offset,
                 uint64_t pitch, uint64_t width, uint64_t rows) {
  if (rows == 0) return 0;
  const uint64_t first = offset - map_offset;
  if (rows == 1 || pitch - width < kSparseRunGapBytes) {
    return map.PopulateRead(first, (rows - 1) * pitch + width);
  }
  for (uint64_t r = 0; r < rows; ++r) {
    if (const int err = map.PopulateRead(first + r * pitch, width); err != 0) {
      return err;
    }
  }
  return 0;
}

void CopyRows(const std::byte* src, uint64_t pitch, uint64_t width,
              uint64_t rows, std::byte* dst) {
  for (uint64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * width, src + r * pitch, width);
  }
}

Status ShrankUnderMapping(const std::string& path, uint64_t offset,
                          uint64_t length) {
  return Status::IoError(
      "file shrank since it was opened (truncated?): pages of " +
      DescribeRange(path, offset, length) + " lie past its end");
}

}  // namespace weightlift::internal
