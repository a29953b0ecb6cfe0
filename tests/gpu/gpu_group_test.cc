// A group load whose loader does not fit its transport is refused, on every
// rank, in the agreement: two ranks (threads) with CUDA loaders on cuda:0
// over ThreadGroup, whose collectives are memcpys between host buffers.
// Before the transport said where its memory must be, those memcpys were
// handed device pointers. Skips with the reason when cuda:0 cannot be used.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cuda/device_available.h"
#include "dist/thread_group.h"
#include "format/synth.h"
#include "weightlift/checkpoint.h"
#include "weightlift/group.h"
#include "weightlift/loader.h"

namespace weightlift::internal {
namespace {

TEST(GroupLoadOnGpu, ALoaderThatDoesNotFitTheTransportIsRefusedOnEveryRank) {
  std::string why;
  if (!CudaDeviceAvailable(0, &why)) {
    GTEST_SKIP() << "no usable CUDA device: " << why;
  }
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "wl_gpu_group_XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  ASSERT_TRUE(Synthesize("tiny", 1, dir, 3).ok());
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  ThreadGroup group(2, std::chrono::milliseconds(30000));
  std::vector<Status> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      LoadOptions o;
      o.device = Device::Cuda(0);
      o.threads = 1;
      auto loader = Loader::Create(o);
      if (!loader.ok()) {
        got[r] = loader.status();
        return;
      }
      auto result = LoadWithGroup(**loader, *ckpt, group.rank(r), {});
      got[r] = result.ok() ? Status::OK() : result.status();
    });
  }
  for (auto& t : ranks) t.join();
  std::filesystem::remove_all(dir);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r].code(), StatusCode::kInvalidArgument) << got[r].ToString();
    EXPECT_NE(got[r].message().find("moves memory on cpu"), std::string::npos)
        << got[r].ToString();
  }
}

}  // namespace
}  // namespace weightlift::internal
