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

// FLAG's value, or the environment's NAME (torchrun's), or an error.
StatusOr<int> FromFlagOrEnv(int flag, const char* option, const char* name) {
  if (flag != GroupFlags::kNotGiven) return flag;
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') {
    return Status::InvalidArgument(std::string(option) +
                                   " is required with --group (or set " + name +
                                   ", as torchrun does)");
  }
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 65536) {
    return Status::InvalidArgument(std::string(name) + "=" + env +
                                   " is not a rank count (" + option + ")");
  }
  return static_cast<int>(v);
}

// Rank 0: the id into PATH, whole or not at all (written beside it, then
// renamed over it).
Status WriteId(const std::string& path, const NcclId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << NcclIdToHex(id) << "\n";
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

// The others: the id from PATH once rank 0 wrote it, within TIMEOUT_S.
StatusOr<NcclId> WaitForId(const std::string& path, int rank,
                           double timeout_s) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_s));
  Status last = Status::NotFound("not there yet");
  while (true) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string hex(512, '\0');
      in.read(hex.data(), static_cast<std::streamsize>(hex.size()));
      hex.resize(static_cast<size_t>(in.gcount()));
      while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) {
        hex.pop_back();
      }
      StatusOr<NcclId> id = NcclIdFromHex(hex);
      if (id.ok()) return id;
      last = id.status();  // rename makes it whole; a stranger's file
    }
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
  app->add_option("--group-timeout", flags->timeout_s,
                  "seconds a rank waits for the id, for the others to join "
                  "and for each collective")
      // At most a week: the deadline stays well inside the clock's range.
      ->check(CLI::Range(0.001, 7 * 86400.0))
      ->capture_default_str();
}

StatusOr<GroupPlace> ResolveGroup(const GroupFlags& flags,
                                  const Device& device) {
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
  if (!device.is_cuda()) {
    return Status::InvalidArgument(
        "--group nccl moves GPU memory: give --device cuda:N (this rank's "
        "GPU), not " +
        device.ToString());
  }
  if (flags.id_file.empty()) {
    return Status::InvalidArgument(
        "--nccl-id FILE is required with --group nccl");
  }
  return place;
}

StatusOr<std::unique_ptr<GroupTransport>> JoinGroup(const GroupFlags& flags,
                                                    const Device& device) {
  WL_ASSIGN_OR_RETURN(GroupPlace place, ResolveGroup(flags, device));
  const int rank = place.rank;
  const int size = place.size;
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000));
  NcclId id;
  if (rank == 0) {
    WL_ASSIGN_OR_RETURN(id, MakeNcclId());
    WL_RETURN_IF_ERROR(WriteId(flags.id_file, id));
  } else {
    WL_ASSIGN_OR_RETURN(id, WaitForId(flags.id_file, rank, flags.timeout_s));
  }
  StatusOr<std::unique_ptr<GroupTransport>> group =
      JoinNcclGroup(id, rank, size, device.index, timeout);
  if (rank == 0) {
    // Joined: every rank has read it. Failed: no one may join it later.
    std::error_code ec;
    std::filesystem::remove(flags.id_file, ec);
  }
  return group;
}

}  // namespace weightlift::cli
