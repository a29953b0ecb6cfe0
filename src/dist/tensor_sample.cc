#include "dist/tensor_sample.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "env/file.h"
#include "format/held_files.h"

namespace weightlift::internal {

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
  // The files Checkpoint::Open read the headers through: they take reads of
  // any offset and length.
  std::vector<std::shared_ptr<File>> files(picked.size());
  for (size_t i = 0; i < picked.size(); ++i) {
    files[i] = HeldFiles::Get(holder, picked[i]->file);
    if (files[i] == nullptr) return std::string();  // built by hand
  }
  std::string out(picked.size() * kSampleBytes, '\0');
  std::vector<Status> failed(picked.size());
  std::atomic<size_t> next{0};
  auto read_rest = [&] {
    for (size_t i; (i = next.fetch_add(1)) < picked.size();) {
      const TensorInfo& t = *picked[i];
      const uint64_t len = std::min<uint64_t>(kSampleBytes, t.size);
      const uint64_t at = t.offset + (t.size - len) / 2;
      auto* dst = reinterpret_cast<std::byte*>(out.data() + i * kSampleBytes);
      if (Status s = files[i]->ReadAt(at, {dst, len}); !s.ok()) {
        failed[i] = s.WithContext("reading a sample of tensor '" + t.name +
                                  "' for the group's agreement");
      }
      if (i == 0) return;  // the first read alone: it is timed below
    }
  };
  // The first read on this thread, timed. A local file answers in
  // microseconds, less than starting a thread costs; helpers only when a
  // read takes a round trip (object storage), up to 8 reads at once then.
  const auto start = std::chrono::steady_clock::now();
  read_rest();
  const bool slow =
      std::chrono::steady_clock::now() - start > std::chrono::microseconds(200);
  std::vector<std::thread> helpers;
  if (slow) {
    const size_t threads = std::min<size_t>(8, picked.size());
    for (size_t k = 1; k < threads; ++k) helpers.emplace_back(read_rest);
  }
  read_rest();
  for (std::thread& th : helpers) th.join();
  for (Status& s : failed) {
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace weightlift::internal
