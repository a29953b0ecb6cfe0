// A loader inherited across fork(): in the child it refuses to load with a
// clear error instead of waiting forever for worker threads that stayed in
// the parent, its destructor returns, a loader made in the child loads
// bit-exact, and a load running in the parent when it forked is untouched
// (util/fork_epoch.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "env/testing/temp_dir.h"
#include "exec/host_loader.h"
#include "exec/testing/u8_tensors.h"
#include "format/writer.h"
#include "util/testing/run_forked.h"
#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::ReadFileOrDie;
using testing::RunForked;
using testing::TempDir;

constexpr auto kTimeout = std::chrono::seconds(30);

// Under ThreadSanitizer the child checks the refusal and the destructor
// only: it may not start a thread (run_forked.h).
constexpr bool kChildMayStartThreads = !testing::kUnderThreadSanitizer;

class ForkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 8; ++i) {
      data_.push_back(RandomBytes((512 << 10) + 13 * i, 100 + i));
    }
    path_ = dir_.File("model.safetensors");
    ASSERT_TRUE(
        WriteSafetensors(path_, testing::U8Tensors("t", data_), {}).ok());
    auto c = Checkpoint::Open(path_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ckpt_ = std::make_unique<Checkpoint>(std::move(*c));
    options_.threads = 3;
    options_.chunk_bytes = 128 << 10;  // many chunks: every worker reads
  }

  std::unique_ptr<Loader> MakeLoader() {
    auto l = CreateHostLoader(options_);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(*l) : nullptr;
  }

  // Whether R holds every tensor's bytes as written.
  bool Exact(const LoadResult& r) const {
    if (r.tensors.size() != data_.size()) return false;
    for (const LoadedTensor& t : r.tensors) {
      const auto& want = data_[std::stoul(t.name.substr(1))];
      if (t.size != want.size() ||
          std::memcmp(t.data, want.data(), want.size()) != 0) {
        return false;
      }
    }
    return true;
  }

  // In the child: LOADER refuses (1-3), its destructor returns, and a new
  // loader loads bit-exact (4-5). 0 when all of that held.
  int ChildRefusesThenLoadsAfresh(std::unique_ptr<Loader>& loader) {
    StatusOr<LoadResult> r = loader->Load(*ckpt_);
    if (r.ok()) return 1;
    if (r.status().code() != StatusCode::kUnsupported) return 2;
    if (r.status().message().find("forked") == std::string::npos) return 3;
    loader.reset();  // would join threads that are not in this process
    if (!kChildMayStartThreads) return 0;
    std::unique_ptr<Loader> fresh = MakeLoader();
    if (!fresh) return 4;
    StatusOr<LoadResult> again = fresh->Load(*ckpt_);
    return again.ok() && Exact(*again) ? 0 : 5;
  }

  TempDir dir_;
  std::vector<std::vector<std::byte>> data_;
  std::string path_;
  std::unique_ptr<Checkpoint> ckpt_;
  LoadOptions options_;
};

TEST_F(ForkTest, AnInheritedLoaderRefusesToLoadAndIsFreedWithoutItsThreads) {
  std::unique_ptr<Loader> loader = MakeLoader();
  ASSERT_TRUE(loader);
  // Its workers exist and wait for the next load when the process forks.
  auto first = loader->Load(*ckpt_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(Exact(*first));
  EXPECT_EQ(
      RunForked([&] { return ChildRefusesThenLoadsAfresh(loader); }, kTimeout),
      "exit 0");
  // The parent's loader is unchanged.
  auto after = loader->Load(*ckpt_);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(Exact(*after));
}

TEST_F(ForkTest, ALoadRunningWhenTheProcessForksGoesOnInTheParentOnly) {
  std::unique_ptr<Loader> loader = MakeLoader();
  ASSERT_TRUE(loader);
  // A load on another thread, held in the middle (one worker blocked in
  // on_ready, the loader's lock held) while the main thread forks.
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  LoadCallbacks cb;
  cb.on_ready = [&](size_t, const TensorInfo&) {
    if (started.fetch_add(1) == 0) {
      started.notify_all();
      while (!release.load()) release.wait(false);
    }
  };
  StatusOr<LoadResult> held = Status::Internal("not run");
  std::thread parent_load([&] { held = loader->Load(*ckpt_, {}, cb); });
  while (started.load() == 0) started.wait(0);
  const std::string child =
      RunForked([&] { return ChildRefusesThenLoadsAfresh(loader); }, kTimeout);
  release.store(true);
  release.notify_all();
  parent_load.join();
  EXPECT_EQ(child, "exit 0");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(Exact(*held));
}

}  // namespace
}  // namespace weightlift::internal
