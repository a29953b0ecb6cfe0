#include "env/cold_file.h"

#include <utility>

#include "env/forwarding_file.h"

namespace weightlift::internal {
namespace {

class ColdFile final : public ForwardingFile {
 public:
  using ForwardingFile::ForwardingFile;
  uint64_t read_cost_bytes() const override { return kDirectReadCostBytes; }
};

}  // namespace

std::unique_ptr<File> WithColdReads(std::unique_ptr<File> base) {
  return std::make_unique<ColdFile>(std::move(base));
}

}  // namespace weightlift::internal
