// CPU-side checks of the CUDA entry points that run on every machine: with no
// GPU (or no CUDA in the build) asking for cuda:N is a clear error naming the
// reason, never a crash. On a GPU machine the same calls succeed.
#include "cuda/cuda_loader.h"

#include <gtest/gtest.h>

#include <string>

#include "cuda/device_available.h"
#include "weightlift/loader.h"

namespace weightlift {
namespace {

TEST(CudaLoaderCreate, CudaDeviceIsClearErrorOrWorks) {
  LoadOptions o;
  o.device = Device::Cuda(0);
  std::string why;
  bool available = internal::CudaDeviceAvailable(0, &why);
  auto loader = Loader::Create(o);
  if (available) {
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    EXPECT_TRUE((*loader)->options().device.is_cuda());
    return;
  }
  ASSERT_FALSE(loader.ok());
  const Status& s = loader.status();
  EXPECT_TRUE(s.code() == StatusCode::kUnsupported ||
              s.code() == StatusCode::kCudaError)
      << s.ToString();
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s.ToString();
  if (internal::CudaCompiledIn()) {
    // The reason is the runtime's own error name from cudaGetDeviceCount.
    EXPECT_NE(s.message().find("cudaGetDeviceCount"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("cudaError"), std::string::npos) << s.ToString();
  } else {
    EXPECT_NE(s.message().find("built without CUDA"), std::string::npos)
        << s.ToString();
  }
  // Asking twice gives the same answer (no sticky state, no crash).
  auto again = Loader::Create(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), s.code());
}

TEST(CudaLoaderCreate, DeviceOrdinalOutOfRangeIsAnError) {
  LoadOptions o;
  o.device = Device::Cuda(4096);
  auto loader = Loader::Create(o);
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(loader.status().message().find("cuda:4096"), std::string::npos)
      << loader.status().ToString();
}

TEST(CudaDeviceAvailable, UnavailableDeviceAnswersWithReason) {
  std::string why;
  if (internal::CudaDeviceAvailable(0, &why)) {
    GTEST_SKIP() << "a CUDA device is present; covered by gpu_tests";
  }
  EXPECT_FALSE(why.empty());
}

TEST(CudaLoaderCreate, CreateCudaLoaderRejectsCpuDevice) {
  LoadOptions o;  // cpu
  auto loader = internal::CreateCudaLoader(o);
  ASSERT_FALSE(loader.ok());
}

}  // namespace
}  // namespace weightlift
