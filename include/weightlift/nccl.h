// NCCL as a group load's transport, for C++ callers (docs/tensor-parallel.md):
// one rank per CUDA device, any number of hosts. libnccl is loaded at run
// time (never linked), so a program built with weightlift runs where NCCL
// is absent and these calls say why they cannot.
//
//   weightlift::NcclId id;                     // rank 0 makes it ...
//   if (rank == 0) id = *weightlift::MakeNcclId();
//   ... and sends it to every rank out of band (NcclIdToHex: a file, an
//   environment variable, a socket, MPI).
//   auto group = weightlift::JoinNcclGroup(id, rank, size, /*device=*/local,
//                                          std::chrono::minutes(5));
//   auto result = weightlift::LoadWithGroup(**loader, ckpt, **group, req);
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "weightlift/group.h"
#include "weightlift/status.h"

namespace weightlift {

// What every rank of one NCCL communicator joins with (ncclUniqueId's
// bytes).
struct NcclId {
  std::array<std::byte, 128> bytes{};
};

// A fresh id (ncclGetUniqueId), made once, by one rank. Unsupported when
// libnccl cannot be loaded or this build has no CUDA, saying which.
StatusOr<NcclId> MakeNcclId();

// ID as 256 lowercase hex digits, and back (either case read):
// InvalidArgument for any other text, naming what is wrong.
std::string NcclIdToHex(const NcclId& id);
StatusOr<NcclId> NcclIdFromHex(std::string_view hex);

// Joins ID's communicator as RANK of SIZE on CUDA device DEVICE (the
// calling thread's current device becomes DEVICE; no other device is
// touched). TIMEOUT: 1 ms to 7 days. Joining waits at most TIMEOUT for
// every rank (NCCL >= 2.14; an older libnccl has only a blocking join), and
// so does every collective of a group load after, including each batch's
// status exchange, where a rank that has read its bytes of the batch waits
// for the slowest (a batch is at most 4 GiB of the checkpoint with the
// automatic size); a collective that times out aborts the communicator and
// fails the load on every rank that waits for it. The transport moves memory on
// DEVICE, so the loader handed to LoadWithGroup with it must be a CUDA loader
// on DEVICE. InvalidArgument for a rank outside [0, SIZE) or a timeout out of
// range; Unsupported without libnccl or CUDA; CudaError for a device that
// cannot be used; IoError when NCCL fails or the join times out.
StatusOr<std::unique_ptr<GroupTransport>> JoinNcclGroup(
    const NcclId& id, int rank, int size, int device,
    std::chrono::milliseconds timeout);

}  // namespace weightlift
