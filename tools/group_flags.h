// `weightlift load --group nccl --nccl-id FILE [--group-rank R]
// [--group-size N] [--group-timeout S]`: group mode from the command line
// (docs/tensor-parallel.md): this process is rank R of N, one per GPU; the
// ranks split the reading and NCCL delivers the rest (with --tp-*: this
// rank's parts, replicated tensors read once in the group). Rank 0 makes
// the NCCL id and writes it to FILE (a path every rank sees); the others
// wait for it there. R and N default to torchrun's RANK and WORLD_SIZE,
// and `--device cuda` to cuda:$LOCAL_RANK.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "weightlift/group.h"
#include "weightlift/options.h"
#include "weightlift/status.h"

namespace CLI {
class App;
}

namespace weightlift::cli {

struct GroupFlags {
  static constexpr int kNotGiven = std::numeric_limits<int>::min();
  std::string kind;     // "nccl"; empty: no group
  std::string id_file;  // --nccl-id
  int rank = kNotGiven;
  int size = kNotGiven;
  double timeout_s = 300;
  bool timeout_given = false;
  bool requested() const { return !kind.empty(); }
  // Any --group-* or --nccl-id flag (an error without --group).
  bool any_given() const {
    return !id_file.empty() || rank != kNotGiven || size != kNotGiven ||
           timeout_given;
  }
};

void AddGroupFlags(CLI::App* app, GroupFlags* flags);

// This process's place in the group, from the flags, before anything is
// made: rank and size (from RANK / WORLD_SIZE when not given), the CUDA
// device DEVICE_TEXT names (a bare "cuda" is cuda:$LOCAL_RANK: the same
// cuda:0 on every rank would put them all on one GPU), --nccl-id given.
// InvalidArgument naming the flag otherwise.
struct GroupPlace {
  int rank = 0;
  int size = 1;
  Device device;
};
StatusOr<GroupPlace> ResolveGroup(const GroupFlags& flags,
                                  const std::string& device_text);

// Joins PLACE's group: rank 0 makes the NCCL id and writes it to the id
// file, the others wait for it at most the timeout (nccl_id_file.h: how an
// id an earlier run left there is never joined), then JoinNcclGroup. Rank
// 0 removes the file once every rank has joined, when joining failed, and
// on SIGTERM / SIGINT meanwhile. IoError when the id never came or cannot
// be written; what JoinNcclGroup says otherwise.
StatusOr<std::unique_ptr<GroupTransport>> JoinGroup(const GroupFlags& flags,
                                                    const GroupPlace& place);

}  // namespace weightlift::cli
