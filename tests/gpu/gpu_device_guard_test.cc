// A tensor-parallel rank touches only its own GPU: ScopedDevice (and the
// group load's memory, which frees through it) gives a thread back the
// context it had, or none. Before, a thread with no context "restored"
// cudaGetDevice's default, 0, and cudaSetDevice(0) made a context on GPU 0
// for every rank. One GPU shows the mechanism: a thread that had no context
// has none after, whichever thread allocates, copies or frees. Skips with
// the reason when cuda:0 cannot be used.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/device_available.h"
#include "dist/group_memory.h"

namespace weightlift::internal {
namespace {

using CtxGetCurrentFn = CUresult (*)(CUcontext*);

// This thread's current context (null: none), through the driver the
// runtime loaded.
CUcontext Current() {
  static const CtxGetCurrentFn get =
      DriverFn<CtxGetCurrentFn>("cuCtxGetCurrent");
  CUcontext c = nullptr;
  if (!get || get(&c) != CUDA_SUCCESS) ADD_FAILURE() << "no cuCtxGetCurrent";
  return c;
}

// FN on a new thread (which starts with no context).
template <typename Fn>
void OnNewThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

class DeviceGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceAvailable(0, &why)) {
      GTEST_SKIP() << "no usable CUDA device: " << why;
    }
  }
};

TEST_F(DeviceGuardTest, AThreadWithoutAContextGetsNoneBack) {
  OnNewThread([] {
    ASSERT_EQ(Current(), nullptr);
    {
      ScopedDevice on(0);
      ASSERT_EQ(on.error(), cudaSuccess);
      EXPECT_NE(Current(), nullptr);  // the device's, while it lives
      void* p = nullptr;
      ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
      ASSERT_EQ(cudaFree(p), cudaSuccess);
    }
    EXPECT_EQ(Current(), nullptr);
  });
}

TEST_F(DeviceGuardTest, AThreadWithAContextGetsItBack) {
  OnNewThread([] {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context, made now
    const CUcontext mine = Current();
    ASSERT_NE(mine, nullptr);
    { ScopedDevice on(0); }
    EXPECT_EQ(Current(), mine);
  });
}

TEST_F(DeviceGuardTest, GroupMemoryLeavesNoContextOnTheThreadsItPasses) {
  std::shared_ptr<void> memory;
  OnNewThread([&] {
    auto m = AllocateOn(Device::Cuda(0), 4096);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    memory = std::move(*m);
    std::vector<char> in(4096, 7), out(4096, 0);
    ASSERT_TRUE(CopyIn(Device::Cuda(0), memory.get(), in.data(), 4096).ok());
    ASSERT_TRUE(CopyOut(Device::Cuda(0), out.data(), memory.get(), 4096).ok());
    EXPECT_EQ(in, out);
    EXPECT_EQ(Current(), nullptr);
  });
  ASSERT_NE(memory, nullptr);
  OnNewThread([&] {
    memory.reset();  // the last owner frees on this thread
    EXPECT_EQ(Current(), nullptr);
  });
  OnNewThread([] {
    {
      OnDevice on(Device::Cuda(0));  // a group load's whole run
      EXPECT_NE(Current(), nullptr);
    }
    EXPECT_EQ(Current(), nullptr);
  });
}

}  // namespace
}  // namespace weightlift::internal
