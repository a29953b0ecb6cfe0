#include "group_flags.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dist/nccl_lib.h"
#include "nccl_id_file.h"
#include "weightlift/nccl.h"

namespace weightlift::cli {
namespace {

// The environment's NAME as a rank number, or nullopt when unset.
StatusOr<std::optional<int>> EnvRank(const char* name, const char* option) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return std::optional<int>();
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 65536) {
    return Status::InvalidArgument(std::string(name) + "=" + env +
                                   " is not a rank number (" + option + ")");
  }
  return std::optional<int>(static_cast<int>(v));
}

// FLAG's value, or the environment's NAME (torchrun's), or an error.
StatusOr<int> FromFlagOrEnv(int flag, const char* option, const char* name) {
  if (flag != GroupFlags::kNotGiven) return flag;
  WL_ASSIGN_OR_RETURN(std::optional<int> v, EnvRank(name, option));
  if (!v) {
    return Status::InvalidArgument(std::string(option) +
                                   " is required with --group (or set " + name +
                                   ", as torchrun does)");
  }
  return *v;
}

}  // namespace

void AddGroupFlags(CLI::App* app, GroupFlags* flags) {
  app->add_option("--group", flags->kind,
                  "group mode: nccl (one process per GPU; each reads about "
                  "1/N, NCCL delivers the rest)")
      ->check(CLI::IsMember({"nccl"}));
  app->add_option("--nccl-id", flags->id_file,
                  "file every rank sees: rank 0 writes the NCCL id there, "
                  "the others wait for it (a fresh path per run)");
  app->add_option("--group-rank", flags->rank,
                  "this process's rank in the group (default: $RANK)");
  app->add_option("--group-size", flags->size,
                  "number of ranks (default: $WORLD_SIZE)");
  app->add_option_function<double>(
         "--group-timeout",
         [flags](double s) {
           flags->timeout_s = s;
           flags->timeout_given = true;
         },
         "seconds a rank waits for the id, for the others to join and for "
         "each collective (default 300)")
      // At most a week: the deadline stays well inside the clock's range.
      // (Range alone lets NaN through: its comparisons are false.)
      ->check(CLI::Validator(
          [](std::string& text) {
            const double v = std::strtod(text.c_str(), nullptr);
            return std::isfinite(v) ? std::string()
                                    : "not a number of seconds: " + text;
          },
          "finite"))
      ->check(CLI::Range(0.001, 7 * 86400.0));
}

StatusOr<GroupPlace> ResolveGroup(const GroupFlags& flags,
                                  const std::string& device_text) {
  GroupPlace place;
  WL_ASSIGN_OR_RETURN(place.rank,
                      FromFlagOrEnv(flags.rank, "--group-rank", "RANK"));
  WL_ASSIGN_OR_RETURN(place.size,
                      FromFlagOrEnv(flags.size, "--group-size", "WORLD_SIZE"));
  if (place.size < 1 || place.rank < 0 || place.rank >= place.size) {
    return Status::InvalidArgument(
        "--group: rank " + std::to_string(place.rank) + " of " +
        std::to_string(place.size) + " (want 0 <= rank < size)");
  }
  if (device_text == "cuda") {
    WL_ASSIGN_OR_RETURN(std::optional<int> local,
                        EnvRank("LOCAL_RANK", "--device cuda"));
    if (!local) {
      return Status::InvalidArgument(
          "--group nccl: give this rank's GPU as --device cuda:N (a bare "
          "cuda is cuda:$LOCAL_RANK, and LOCAL_RANK is not set)");
    }
    place.device = Device::Cuda(*local);
  } else {
    WL_ASSIGN_OR_RETURN(place.device, Device::Parse(device_text));
  }
  if (!place.device.is_cuda()) {
    return Status::InvalidArgument(
        "--group nccl moves GPU memory: give --device cuda:N (this rank's "
        "GPU), not " +
        place.device.ToString());
  }
  if (flags.id_file.empty()) {
    return Status::InvalidArgument(
        "--nccl-id FILE is required with --group nccl");
  }
  return place;
}

StatusOr<std::unique_ptr<GroupTransport>> JoinGroup(const GroupFlags& flags,
                                                    const GroupPlace& place) {
  if (!std::isfinite(flags.timeout_s) || flags.timeout_s <= 0) {
    return Status::InvalidArgument("--group-timeout: want seconds > 0");
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  NcclId id;
  // Rank 0's file: written now, kept fresh while the others join, removed
  // when this returns (joined: every rank has read it; failed: no one may
  // join it later).
  std::unique_ptr<NcclIdFile> file;
  if (place.rank == 0) {
    WL_ASSIGN_OR_RETURN(id, MakeNcclId());
    WL_ASSIGN_OR_RETURN(file, NcclIdFile::Write(flags.id_file, id));
  } else {
    WL_ASSIGN_OR_RETURN(
        id, WaitForNcclIdFile(flags.id_file, place.rank, flags.timeout_s));
  }
  if (auto lib = internal::NcclLib::Get();
      lib.ok() && (*lib)->comm_init_rank_config == nullptr) {
    // JoinNcclGroup's join is blocking there: say so before it blocks.
    std::fprintf(stderr,
                 "weightlift: warning: rank %d: this libnccl is older than "
                 "2.14 and cannot join with a timeout; a rank that never "
                 "joins leaves this one waiting (--group-timeout covers the "
                 "collectives only)\n",
                 place.rank);
  }
  return JoinNcclGroup(id, place.rank, place.size, place.device.index, timeout);
}

}  // namespace weightlift::cli
