#include "exec/open_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "env/testing/temp_dir.h"
#include "exec/thread_pool.h"
#include "format/writer.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {
namespace {

using testing::RandomBytes;
using testing::TempDir;

constexpr int kShards = 5;

// A checkpoint of kShards files, one 1 MiB u8 tensor each ("t0".."t4").
class OpenFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_path_ = dir_.File("ckpt");
    ASSERT_EQ(::mkdir(dir_path_.c_str(), 0755), 0);
    std::vector<std::vector<TensorToWrite>> shards(kShards);
    for (int i = 0; i < kShards; ++i) {
      data_.push_back(RandomBytes(1 << 20, i + 1));
      TensorToWrite t;
      t.name = "t" + std::to_string(i);
      t.shape = {1 << 20};
      t.data = data_.back();
      shards[i].push_back(std::move(t));
    }
    ASSERT_TRUE(WriteShardedCheckpoint(dir_path_, std::move(shards)).ok());
  }

  // A pool whose workers have started, which OpenCheckpointFiles spreads
  // the files over (a pool still starting is passed by).
  static void WaitStarted(const ThreadPool& pool) {
    while (!pool.started()) std::this_thread::yield();
  }

  StatusOr<std::vector<OpenedFile>> Open(const Checkpoint& ckpt,
                                         const std::vector<bool>& needed,
                                         std::vector<std::string>* notes,
                                         ThreadPool* pool) {
    LoadOptions options;
    return OpenCheckpointFiles(ckpt, options, needed, notes, {}, {}, pool);
  }

  TempDir dir_;
  std::string dir_path_;
  std::vector<std::vector<std::byte>> data_;
};

TEST_F(OpenFilesTest, OpenedSideBySideAsOneByOne) {
  auto ckpt = Checkpoint::Open(dir_path_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  std::vector<bool> needed(kShards, true);
  needed[1] = false;
  ThreadPool pool(4);
  WaitStarted(pool);
  std::vector<std::string> serial_notes, spread_notes;
  auto serial = Open(*ckpt, needed, &serial_notes, nullptr);
  auto spread = Open(*ckpt, needed, &spread_notes, &pool);
  ASSERT_TRUE(serial.ok()) << serial.status().ToString();
  ASSERT_TRUE(spread.ok()) << spread.status().ToString();
  ASSERT_EQ(spread->size(), static_cast<size_t>(kShards));
  for (int i = 0; i < kShards; ++i) {
    const OpenedFile& s = (*serial)[i];
    const OpenedFile& p = (*spread)[i];
    EXPECT_EQ(p.report.path, ckpt->files()[i].path);
    EXPECT_EQ(p.report.path_taken, s.report.path_taken) << i;
    EXPECT_EQ(p.file == nullptr, !needed[i]) << i;
    if (!needed[i]) {
      EXPECT_EQ(p.report.path_taken, "none");
      continue;
    }
    // Each opened file reads its own shard's bytes.
    std::vector<std::byte> got(data_[i].size());
    const uint64_t at = ckpt->Find("t" + std::to_string(i))->offset;
    ASSERT_TRUE(p.file->ReadAt(at, got).ok()) << i;
    EXPECT_EQ(got, data_[i]) << i;
  }
  EXPECT_EQ(spread_notes, serial_notes);
}

TEST_F(OpenFilesTest, TheFirstChangedFileInFileOrderIsTheError) {
  auto ckpt = Checkpoint::Open(dir_path_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  // Files 2 and 4 shrink after the checkpoint was opened.
  for (int i : {4, 2}) {
    const std::string& path = ckpt->files()[i].path;
    ASSERT_EQ(::truncate(path.c_str(), ckpt->files()[i].size - 100), 0);
  }
  ThreadPool pool(4);
  WaitStarted(pool);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto opened = Open(*ckpt, std::vector<bool>(kShards, true), nullptr, p);
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kIoError);
    EXPECT_NE(opened.status().message().find(ckpt->files()[2].path),
              std::string::npos)
        << opened.status().ToString();
  }
}

}  // namespace
}  // namespace weightlift::internal
