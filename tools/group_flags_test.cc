// The command line's group setup without a GPU: how ranks find the NCCL id
// (rank 0 writes it, the others wait for it at most the timeout), and that
// rank 0 leaves no id behind for a later run to join by mistake.
#include "group_flags.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cuda/device_available.h"
#include "dist/nccl_lib.h"
#include "env/testing/temp_dir.h"
#include "nccl_id_file.h"
#include "weightlift/nccl.h"

namespace weightlift::cli {
namespace {

GroupPlace Place(int rank, int size) {
  GroupPlace p;
  p.rank = rank;
  p.size = size;
  p.device = Device::Cuda(0);
  return p;
}

GroupFlags Flags(int rank, int size, const std::string& id_file) {
  GroupFlags f;
  f.kind = "nccl";
  f.rank = rank;
  f.size = size;
  f.id_file = id_file;
  f.timeout_s = 0.3;
  return f;
}

TEST(GroupFlags, ARankWaitsForTheIdAtMostItsTimeout) {
  internal::testing::TempDir dir;
  const std::string id_file = dir / "nccl.id";
  const auto t0 = std::chrono::steady_clock::now();
  auto g = JoinGroup(Flags(1, 2, id_file), Place(1, 2));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kIoError);
  EXPECT_NE(g.status().message().find("rank 1: no NCCL id in --nccl-id " +
                                      id_file + " after 0.3 s"),
            std::string::npos)
      << g.status().ToString();
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(5));

  // A file that is not an id (a stranger's): still waited out, and said.
  { std::ofstream(id_file) << "not an id\n"; }
  g = JoinGroup(Flags(1, 2, id_file), Place(1, 2));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("want 256 hex digits"), std::string::npos)
      << g.status().ToString();
  // An id an earlier run left there (another torchrun run id): not joined
  // (nccl_id_file_test.cc has the other cases).
  ::setenv("TORCHELASTIC_RUN_ID", "run-b", 1);
  {
    std::ofstream(id_file) << NcclIdToHex(NcclId{}) << "\nrun run-a restart \n";
  }
  g = JoinGroup(Flags(1, 2, id_file), Place(1, 2));
  ::unsetenv("TORCHELASTIC_RUN_ID");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("it is launch 'run run-a restart ''s"),
            std::string::npos)
      << g.status().ToString();
}

TEST(GroupFlags, AnIdRankZeroWroteIsReadAndJoined) {
  std::string why;
  auto lib = internal::NcclLib::Get();
  if (internal::CudaDeviceAvailable(0, &why) && lib.ok() &&
      (*lib)->comm_init_rank_config == nullptr) {
    // Its blocking join would wait for the absent rank 0 for ever.
    GTEST_SKIP() << "NCCL < 2.14 on this GPU machine: no join timeout";
  }
  internal::testing::TempDir dir;
  const std::string id_file = dir / "nccl.id";
  NcclId id;
  id.bytes[0] = std::byte{7};
  {
    std::ofstream(id_file) << NcclIdToHex(id) << "\n" << LaunchToken() << "\n";
  }
  auto g = JoinGroup(Flags(1, 2, id_file), Place(1, 2));
  // Past the id: what joining says here (no GPU, or no rank 0 to join).
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message().find("no NCCL id"), std::string::npos)
      << g.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(id_file)) << "only rank 0 removes it";
}

TEST(GroupFlags, RankZeroLeavesNoIdBehind) {
  internal::testing::TempDir dir;
  const std::string id_file = dir / "nccl.id";
  auto g = JoinGroup(Flags(0, 1, id_file), Place(0, 1));
  // Joined (a GPU with libnccl: a group of one) or failed (no libnccl, no
  // GPU): either way the id is gone.
  EXPECT_FALSE(std::filesystem::exists(id_file));
  if (g.ok()) {
    EXPECT_EQ((*g)->size(), 1);
  } else {
    EXPECT_NE(g.status().code(), StatusCode::kInvalidArgument)
        << g.status().ToString();
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
}

TEST(GroupFlags, PlaceFromFlagsOrTorchrunsEnvironment) {
  GroupFlags f = Flags(GroupFlags::kNotGiven, GroupFlags::kNotGiven, "/x");
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  auto place = ResolveGroup(f, "cuda:3");
  ASSERT_TRUE(place.ok()) << place.status().ToString();
  EXPECT_EQ(place->rank, 3);
  EXPECT_EQ(place->size, 4);
  EXPECT_EQ(place->device, Device::Cuda(3));
  // A bare cuda is this rank's GPU under torchrun, else refused (every
  // rank would be on cuda:0).
  ::setenv("LOCAL_RANK", "2", 1);
  place = ResolveGroup(f, "cuda");
  ASSERT_TRUE(place.ok()) << place.status().ToString();
  EXPECT_EQ(place->device, Device::Cuda(2));
  ::unsetenv("LOCAL_RANK");
  EXPECT_NE(
      ResolveGroup(f, "cuda").status().message().find("LOCAL_RANK is not set"),
      std::string::npos);
  ::setenv("WORLD_SIZE", "four", 1);
  EXPECT_NE(ResolveGroup(f, "cuda:3")
                .status()
                .message()
                .find("WORLD_SIZE=four is not a rank number"),
            std::string::npos);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_NE(ResolveGroup(f, "cuda:0")
                .status()
                .message()
                .find("--group-rank is required"),
            std::string::npos);
  EXPECT_NE(ResolveGroup(Flags(0, 2, "/x"), "cpu")
                .status()
                .message()
                .find("give --device cuda:N"),
            std::string::npos);
  EXPECT_NE(ResolveGroup(Flags(0, 2, ""), "cuda:0")
                .status()
                .message()
                .find("--nccl-id FILE is required"),
            std::string::npos);
}

}  // namespace
}  // namespace weightlift::cli
