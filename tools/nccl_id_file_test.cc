// The NCCL id file without a GPU: rank 0's id is read back while rank 0
// lives and keeps it fresh; an id of another launch, or one a dead rank 0
// left, is never taken; SIGTERM (torchrun's, when a rank fails) removes it.
#include "nccl_id_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "env/testing/temp_dir.h"

namespace weightlift::cli {
namespace {

NcclId SomeId() {
  NcclId id;
  for (size_t i = 0; i < sizeof id.bytes; ++i) {
    id.bytes[i] = static_cast<std::byte>(i * 7 + 1);
  }
  return id;
}

// Sets PATH's modification time SECONDS into the past.
void Age(const std::string& path, double seconds) {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  struct timespec t[2];
  t[0].tv_sec = t[1].tv_sec = now.tv_sec - static_cast<time_t>(seconds);
  t[0].tv_nsec = t[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0);
}

double AgeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<double>(::time(nullptr) - st.st_mtim.tv_sec);
}

// The torchrun variables, restored after each test.
class NcclIdFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v == nullptr ? std::optional<std::string>()
                                             : std::optional<std::string>(v));
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, v] : saved_) {
      if (v) {
        ::setenv(name, v->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  internal::testing::TempDir dir_;
  std::string path_ = dir_ / "nccl.id";

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(NcclIdFileTest, RankZerosIdIsReadBackAndGoneAfter) {
  {
    auto file = NcclIdFile::Write(path_, SomeId());
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto id = WaitForNcclIdFile(path_, 1, 1.0);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_EQ(NcclIdToHex(*id), NcclIdToHex(SomeId()));
    struct stat st;
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the id is this user's alone";
    if (::geteuid() == 0) {
      // Another user's file (root can make one): refused, and said.
      ASSERT_EQ(::chown(path_.c_str(), 4321, static_cast<gid_t>(-1)), 0);
      auto theirs = WaitForNcclIdFile(path_, 1, 0.1);
      ASSERT_FALSE(theirs.ok());
      EXPECT_NE(theirs.status().message().find("it belongs to uid 4321"),
                std::string::npos)
          << theirs.status().ToString();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path_));
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
}

TEST_F(NcclIdFileTest, ALiveRankZeroKeepsItFresh) {
  auto file = NcclIdFile::Write(path_, SomeId());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Age(path_, 600);
  EXPECT_GE(AgeOf(path_), 599);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_LE(AgeOf(path_), 2) << "not touched in 1.5 s";
  EXPECT_TRUE(WaitForNcclIdFile(path_, 1, 0.5).ok());
}

TEST_F(NcclIdFileTest, AnIdADeadRankZeroLeftIsNotTaken) {
  // Same launch as far as the file can tell (plain torchrun's run id is
  // "none" every time), but nobody has touched it for 10 minutes.
  ::setenv("TORCHELASTIC_RUN_ID", "none", 1);
  {
    auto file = NcclIdFile::Write(path_, SomeId());
    ASSERT_TRUE(file.ok());
    // The dead rank 0: its file stays, its toucher is gone.
    std::filesystem::copy_file(path_, path_ + ".kept");
  }
  std::filesystem::rename(path_ + ".kept", path_);
  Age(path_, 600);
  const auto t0 = std::chrono::steady_clock::now();
  auto id = WaitForNcclIdFile(path_, 3, 0.3);
  EXPECT_GE(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(300));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kIoError);
  const std::string m = id.status().message();
  EXPECT_NE(m.find("rank 3: no NCCL id in --nccl-id " + path_),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("last touched 60"), std::string::npos) << m;  // 600-601 s
  EXPECT_NE(m.find("an earlier run's rank 0 left it"), std::string::npos) << m;
  // Fresh again (a live rank 0 of this launch): taken.
  Age(path_, 0);
  EXPECT_TRUE(WaitForNcclIdFile(path_, 3, 0.3).ok());
}

TEST_F(NcclIdFileTest, AnotherLaunchsIdIsNotTaken) {
  ::setenv("TORCHELASTIC_RUN_ID", "job-7", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
  auto file = NcclIdFile::Write(path_, SomeId());
  ASSERT_TRUE(file.ok());
  // torchrun restarted the worker group: same run id, next restart.
  ::setenv("TORCHELASTIC_RESTART_COUNT", "1", 1);
  auto id = WaitForNcclIdFile(path_, 1, 0.2);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find(
                "it is launch 'run job-7 restart 0''s (an earlier run's?), "
                "this is 'run job-7 restart 1'"),
            std::string::npos)
      << id.status().ToString();
  ::setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
  EXPECT_TRUE(WaitForNcclIdFile(path_, 1, 0.2).ok());
}

TEST_F(NcclIdFileTest, SigtermRemovesIt) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rank 0, joining, when torchrun tears the group down.
    auto file = NcclIdFile::Write(path_, SomeId());
    const char c = file.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(3);
    ::pause();
    ::_exit(4);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(std::filesystem::exists(path_));
  ASSERT_EQ(::kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM) << "the signal still ends it";
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(NcclIdFileTest, AnUnwritableFolderSaysWhy) {
  auto file = NcclIdFile::Write(dir_ / "no/such/x.id", SomeId());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kIoError);
  EXPECT_NE(file.status().message().find("No such file or directory"),
            std::string::npos)
      << file.status().ToString();
}

}  // namespace
}  // namespace weightlift::cli
