// How the ranks of `weightlift load --group nccl` find rank 0's NCCL id: a
// file every rank sees (--nccl-id). Rank 0 writes it whole (beside it, then
// renamed) and keeps it fresh while the others join; the others take it
// only when it is this launch's and alive, so that an id an earlier run
// left behind (a run killed while it joined) is never joined:
// - the file names the launch (torchrun's run id and restart count, which
//   a restarted worker group does not share with the run it replaces);
// - rank 0 touches it every second until the group is joined, and a file
//   untouched for kIdFileStaleSeconds is a dead rank 0's, whatever it says
//   (this is what protects launches whose run id repeats: plain torchrun's
//   "none", launches by hand);
// - rank 0 removes it once joined, on failure, and on SIGTERM / SIGINT
//   (what torchrun sends the others when one rank fails);
// - it is this user's alone (mode 0600; a file another user owns is
//   refused): whoever planted an id there would receive the weights.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "weightlift/nccl.h"
#include "weightlift/status.h"

namespace weightlift::cli {

// A file rank 0 has not touched for this long is not taken. Above NFS's
// default attribute cache (up to 60 s), so a live file read through a
// stale cache still counts as fresh.
inline constexpr double kIdFileStaleSeconds = 120;

// This launch as the id file names it: torchrun's TORCHELASTIC_RUN_ID and
// TORCHELASTIC_RESTART_COUNT (empty when not under torchrun).
std::string LaunchToken();

// Rank 0: writes ID and LaunchToken() to PATH whole, then keeps its
// modification time fresh until destroyed, when it removes PATH (also when
// the write failed: what was there is no one's to join). While it lives,
// SIGTERM and SIGINT remove PATH before they end the process. One at a
// time in a process (the signal handlers are the process's).
class NcclIdFile {
 public:
  static StatusOr<std::unique_ptr<NcclIdFile>> Write(const std::string& path,
                                                     const NcclId& id);
  ~NcclIdFile();
  NcclIdFile(const NcclIdFile&) = delete;
  NcclIdFile& operator=(const NcclIdFile&) = delete;

 private:
  explicit NcclIdFile(std::string path);
  void KeepFresh();

  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread toucher_;
};

// The others: the id in PATH once rank 0 of this launch wrote it and keeps
// it fresh, waiting at most TIMEOUT_S. IoError naming the file and what was
// there otherwise (nothing, not an id, another launch's, a stale one).
StatusOr<NcclId> WaitForNcclIdFile(const std::string& path, int rank,
                                   double timeout_s);

}  // namespace weightlift::cli
