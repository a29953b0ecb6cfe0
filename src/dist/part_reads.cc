#include "dist/part_reads.h"

#include <utility>

namespace weightlift::internal {

void PartReads::Add(const TensorInfo& t, uint64_t first_byte, uint64_t runs,
                    uint64_t run_bytes, uint64_t run_stride,
                    std::vector<uint64_t> part_shape, uintptr_t dst) {
  if (runs == 0 || run_bytes == 0) return;
  if (runs == 1) {
    TensorInfo p = t;
    p.shape = std::move(part_shape);
    p.offset = t.offset + first_byte;
    p.size = run_bytes;
    tensors_.push_back(std::move(p));
    dsts_.push_back(dst);
    bytes_ += run_bytes;
    return;
  }
  for (uint64_t k = 0; k < runs; ++k) {
    TensorInfo p;
    p.name = t.name + "#" + std::to_string(k);
    p.dtype = DType::kU8;
    p.shape = {run_bytes};
    p.file = t.file;
    p.offset = t.offset + first_byte + k * run_stride;
    p.size = run_bytes;
    tensors_.push_back(std::move(p));
    dsts_.push_back(dst + k * run_bytes);
    bytes_ += run_bytes;
  }
}

void PartReads::AddShard(const TensorInfo& t, const TensorShard& s,
                         uintptr_t dst) {
  Add(t, s.first_byte, s.runs, s.run_bytes, s.run_stride, s.shape, dst);
}

Checkpoint PartReads::ToCheckpoint(const Checkpoint& original) const {
  std::vector<FileInfo> files = original.files();
  return Checkpoint(std::move(files), tensors_, original.index_path());
}

std::vector<Destination> PartReads::Destinations() const {
  std::vector<Destination> out;
  out.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.push_back(Destination{
        tensors_[i].name, reinterpret_cast<void*>(dsts_[i]), tensors_[i].size});
  }
  return out;
}

}  // namespace weightlift::internal
