// consumer CHECKPOINT: opens and loads a checkpoint through the installed
// library, into host memory, and checks every value against the formula
// make_checkpoint.py wrote them with. Exit 0 only when all match.
#include <weightlift/checkpoint.h>
#include <weightlift/loader.h>
#include <weightlift/nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>  // C++20: compiles only if the package carried the standard

namespace {

// make_checkpoint.py: "ramp.f32" float32 [4096], value i * 0.5;
// "grid.i64" int64 [64, 8], value 3 * i - 100 (row-major index i).
bool Matches(const weightlift::LoadedTensor& t) {
  if (t.name == "ramp.f32") {
    std::span<const float> v(static_cast<const float*>(t.data), t.size / 4);
    if (v.size() != 4096) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != static_cast<float>(i) * 0.5f) return false;
    }
    return true;
  }
  if (t.name == "grid.i64") {
    std::span<const int64_t> v(static_cast<const int64_t*>(t.data), t.size / 8);
    if (v.size() != 64 * 8 || t.shape != std::vector<uint64_t>{64, 8}) {
      return false;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 3 * static_cast<int64_t>(i) - 100) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer CHECKPOINT\n");
    return 2;
  }
  auto ckpt = weightlift::Checkpoint::Open(argv[1]);
  if (!ckpt.ok()) {
    std::fprintf(stderr, "open: %s\n", ckpt.status().ToString().c_str());
    return 1;
  }
  weightlift::LoadOptions options;  // device cpu
  auto loader = weightlift::Loader::Create(options);
  if (!loader.ok()) {
    std::fprintf(stderr, "create: %s\n", loader.status().ToString().c_str());
    return 1;
  }
  auto result = (*loader)->Load(*ckpt);
  if (!result.ok()) {
    std::fprintf(stderr, "load: %s\n", result.status().ToString().c_str());
    return 1;
  }
  if (result->tensors.size() != 2) {
    std::fprintf(stderr, "loaded %zu tensors, want 2\n",
                 result->tensors.size());
    return 1;
  }
  for (const weightlift::LoadedTensor& t : result->tensors) {
    if (!Matches(t)) {
      std::fprintf(stderr, "tensor %s: values differ from the file's\n",
                   t.name.c_str());
      return 1;
    }
  }
  // The NCCL entry points link from the package: an id made here (or the
  // reason none can be: no libnccl, no CUDA) survives its hex form.
  auto id = weightlift::MakeNcclId();
  if (!id.ok() && id.status().code() != weightlift::StatusCode::kUnsupported) {
    std::fprintf(stderr, "MakeNcclId: %s\n", id.status().ToString().c_str());
    return 1;
  }
  const weightlift::NcclId sent = id.ok() ? *id : weightlift::NcclId{};
  auto received = weightlift::NcclIdFromHex(weightlift::NcclIdToHex(sent));
  if (!received.ok() || received->bytes != sent.bytes) {
    std::fprintf(stderr, "NCCL id: the hex round trip failed\n");
    return 1;
  }
  std::printf("consumer: NCCL %s\n",
              id.ok() ? "id made" : id.status().ToString().c_str());
  std::printf(
      "consumer: %zu tensors from %zu files, %llu bytes, values "
      "match\n%s\n",
      result->tensors.size(), ckpt->files().size(),
      static_cast<unsigned long long>(ckpt->total_bytes()),
      result->report.ToString().c_str());
  return 0;
}
