// `weightlift load --group nccl --nccl-id FILE [--group-rank R]
// [--group-size N] [--group-timeout S]`: group mode from the command line
// (docs/tensor-parallel.md): this process is rank R of N, one per GPU; the
// ranks split the reading and NCCL delivers the rest (with --tp-*: this
// rank's parts, replicated tensors read once in the group). Rank 0 makes
// the NCCL id and writes it to FILE (a path every rank sees); the others
// wait for it there. R and N default to torchrun's RANK and WORLD_SIZE.
#pragma once

#include <limits>
#include <memory>
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
  bool requested() const { return !kind.empty(); }
};

void AddGroupFlags(CLI::App* app, GroupFlags* flags);

// This process's place in the group: the flags checked for a load on
// DEVICE, before anything is made (rank and size from RANK / WORLD_SIZE
// when not given; DEVICE must be a CUDA device; --nccl-id given).
struct GroupPlace {
  int rank = 0;
  int size = 1;
};
StatusOr<GroupPlace> ResolveGroup(const GroupFlags& flags,
                                  const Device& device);

// A joined group for a load on DEVICE: ResolveGroup, the NCCL id written by
// rank 0 or waited for by the others (at most the timeout), then
// JoinNcclGroup. Rank 0 removes the id file once every rank
// has joined, or when joining failed, so that no later run reads a stale
// id. InvalidArgument for bad flags; IoError when the id never came or
// cannot be written; what JoinNcclGroup says otherwise.
StatusOr<std::unique_ptr<GroupTransport>> JoinGroup(const GroupFlags& flags,
                                                    const Device& device);

}  // namespace weightlift::cli
