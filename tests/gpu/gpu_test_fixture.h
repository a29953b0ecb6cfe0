// What the GPU test fixtures share: a skip (with the reason) when cuda:0
// cannot be used, a temporary directory per test, safetensors files written
// into it (st_builder.h), and the two references every check uses: a
// tensor's bytes as the file holds them (read with stdio, independent of
// every loader) and device memory copied back to the host.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/device_available.h"
#include "st_builder.h"
#include "weightlift/checkpoint.h"

namespace weightlift::testing {

// mkdtemp of BASE/PREFIX_XXXXXX; empty on failure.
inline std::string MakeTempDir(const std::string& base,
                               const std::string& prefix) {
  std::string tmpl = base + "/" + prefix + "_XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return {};
  return tmpl;
}

class GpuFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!internal::CudaDeviceAvailable(0, &why)) {
      GTEST_SKIP() << "no usable CUDA device: " << why;
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    const char* tmp = getenv("TMPDIR");
    dir_ = MakeTempDir(tmp ? tmp : "/tmp", "wl_gpu");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Writes one file into the test's directory; returns its path.
  std::string Write(const std::string& name, const std::vector<TensorSpec>& s,
                    uint64_t seed, bool pad = false) {
    std::string err;
    auto f = WriteSafetensors(dir_ + "/" + name, s, seed, pad, &err);
    EXPECT_FALSE(f.path.empty()) << err;
    return f.path;
  }

  // The bytes the file holds for tensor T of CK.
  static std::vector<uint8_t> FileBytes(const Checkpoint& ck,
                                        const TensorInfo& t) {
    std::vector<uint8_t> out(t.size);
    FILE* f = fopen(ck.files()[t.file].path.c_str(), "rb");
    EXPECT_NE(f, nullptr);
    if (!f) return out;
    fseeko(f, static_cast<off_t>(t.offset), SEEK_SET);
    size_t got = t.size ? fread(out.data(), 1, t.size, f) : 0;
    fclose(f);
    EXPECT_EQ(got, t.size) << t.name;
    return out;
  }

  // N bytes of device memory at P, copied to the host.
  static std::vector<uint8_t> DeviceBytes(const void* p, uint64_t n) {
    std::vector<uint8_t> out(n);
    if (n) {
      EXPECT_EQ(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return out;
  }

  std::string dir_;
};

}  // namespace weightlift::testing
