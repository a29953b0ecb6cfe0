#include "dist/tensor_sample.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "env/file.h"
#include "format/held_files.h"

namespace weightlift::internal {
namespace {

// DST.size() bytes at AT, also from a file that takes aligned reads only
// (O_DIRECT): then the aligned blocks around them, through a bounce.
Status ReadSample(File& file, uint64_t at, std::span<std::byte> dst) {
  const uint64_t align = std::max<uint64_t>(file.alignment(), 1);
  if (align == 1) return file.ReadAt(at, dst);
  const uint64_t begin = at / align * align;
  uint64_t end = (at + dst.size() + align - 1) / align * align;
  const uint64_t size = file.size();
  const uint64_t read = std::min(end, size) - begin;
  end = begin + (read + align - 1) / align * align;  // room up to alignment
  std::unique_ptr<std::byte, decltype(&std::free)> bounce(
      static_cast<std::byte*>(std::aligned_alloc(align, end - begin)),
      &std::free);
  if (bounce == nullptr) return Status::ResourceExhausted("sample bounce");
  WL_RETURN_IF_ERROR(file.ReadAt(begin, {bounce.get(), read}));
  std::memcpy(dst.data(), bounce.get() + (at - begin), dst.size());
  return Status::OK();
}

}  // namespace

StatusOr<std::string> SampleTensorBytes(const Checkpoint& holder,
                                        std::span<const TensorInfo> tensors) {
  // Which tensors: evenly spread, the same on every rank.
  std::vector<const TensorInfo*> picked;
  const size_t n = tensors.size();
  const size_t want = std::min(n, kSampledTensors);
  for (size_t i = 0; i < want; ++i) {
    const TensorInfo& t = tensors[i * n / want];
    if (t.size > 0) picked.push_back(&t);
  }
  std::vector<std::shared_ptr<File>> files(picked.size());
  for (size_t i = 0; i < picked.size(); ++i) {
    files[i] = HeldFiles::Get(holder, picked[i]->file);
    if (files[i] == nullptr) return std::string();  // built by hand
  }
  std::string out(picked.size() * kSampleBytes, '\0');
  std::vector<Status> failed(picked.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < picked.size();) {
      const TensorInfo& t = *picked[i];
      const uint64_t len = std::min<uint64_t>(kSampleBytes, t.size);
      const uint64_t at = t.offset + (t.size - len) / 2;
      auto* dst = reinterpret_cast<std::byte*>(out.data() + i * kSampleBytes);
      Status s = ReadSample(*files[i], at, {dst, len});
      if (!s.ok()) {
        failed[i] = s.WithContext("reading a sample of tensor '" + t.name +
                                  "' for the group's agreement");
      }
    }
  };
  const size_t threads = std::min<size_t>(8, picked.size());
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  for (Status& s : failed) {
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace weightlift::internal
