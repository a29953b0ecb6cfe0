#include "exec/resident_mapping.h"

#include <memory>
#include <utility>

#include "env/page_cache.h"
#include "format/held_files.h"
#include "util/percent.h"

namespace weightlift::internal {

StatusOr<std::optional<Mapping>> MapResidentFile(const Checkpoint& ckpt,
                                                 uint32_t i,
                                                 double resident_threshold,
                                                 std::string* skipped) {
  const std::string& path = ckpt.files()[i].path;
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      OpenForLoad(ckpt, i, Backend::kPread, IoOptions{}));
  if (f->native_fd() < 0) {
    *skipped = path + ": not a local file";
    return std::optional<Mapping>();
  }
  StatusOr<Residency> res = SampleResidency(*f);
  if (!res.ok() || res->fraction < resident_threshold) {
    *skipped =
        path + ": " +
        (res.ok() ? "pages " + Percent(res->fraction) + " resident"
                  : "residency unknown (" + res.status().message() + ")");
    return std::optional<Mapping>();
  }
  StatusOr<Mapping> map = f->Map(0, f->size(), MapAccess::kReadShared);
  if (!map.ok()) {
    *skipped = path + ": cannot be mapped (" + map.status().message() + ")";
    return std::optional<Mapping>();
  }
  return std::optional<Mapping>(std::move(*map));
}

}  // namespace weightlift::internal
