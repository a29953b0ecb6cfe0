#include "group_flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "weightlift/nccl.h"

namespace weightlift::cli {
namespace {

using Clock = std::chrono::steady_clock;

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

// torchrun's id of this run (the same on every rank of it), or "".
std::string RunId() {
  const char* id = std::getenv("TORCHELASTIC_RUN_ID");
  return id == nullptr ? "" : id;
}

// Rank 0: the id, then the run id, into PATH, whole or not at all
// (written beside it, then renamed over it).
Status WriteId(const std::string& path, const NcclId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << NcclIdToHex(id) << "\n" << RunId() << "\n";
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return Status::IoError("--nccl-id " + path + ": cannot write " + tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IoError("--nccl-id " + path + ": rename: " + ec.message());
  }
  return Status::OK();
}

// The id in PATH if rank 0 of this run wrote it.
StatusOr<NcclId> ReadId(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("not there yet");
  std::string hex, run;
  std::getline(in, hex);
  std::getline(in, run);
  if (!hex.empty() && hex.back() == '\r') hex.pop_back();
  WL_ASSIGN_OR_RETURN(NcclId id, NcclIdFromHex(hex));
  if (run != RunId()) {
    return Status::InvalidArgument("it is run '" + run +
                                   "''s (an earlier run's?), this is run '" +
                                   RunId() + "'");
  }
  return id;
}

// The others: the id from PATH once rank 0 wrote it, within TIMEOUT_S.
StatusOr<NcclId> WaitForId(const std::string& path, int rank,
                           double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s));
  Status last;
  while (true) {
    StatusOr<NcclId> id = ReadId(path);
    if (id.ok()) return id;
    last = id.status();
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%g", timeout_s);
  return Status::IoError(
      "rank " + std::to_string(rank) + ": no NCCL id in --nccl-id " + path +
      " after " + waited + " s (is rank 0 running with the same --nccl-id?)" +
      (last.code() == StatusCode::kNotFound ? "" : "; " + last.ToString()));
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
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  NcclId id;
  if (place.rank == 0) {
    WL_ASSIGN_OR_RETURN(id, MakeNcclId());
    WL_RETURN_IF_ERROR(WriteId(flags.id_file, id));
  } else {
    WL_ASSIGN_OR_RETURN(id,
                        WaitForId(flags.id_file, place.rank, flags.timeout_s));
  }
  StatusOr<std::unique_ptr<GroupTransport>> group =
      JoinNcclGroup(id, place.rank, place.size, place.device.index, timeout);
  if (place.rank == 0) {
    // Joined: every rank has read it. Failed: no one may join it later.
    std::error_code ec;
    std::filesystem::remove(flags.id_file, ec);
  }
  return group;
}

}  // namespace weightlift::cli
