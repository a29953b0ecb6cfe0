// GroupTransport: the collectives a process group offers a group load.
//
// A group load (docs/tensor-parallel.md) reads part of a checkpoint on each
// rank and delivers the rest through the group. The plan of who reads what
// (src/plan/group_plan.h) is the same on every rank; a transport only moves
// bytes, in the order every rank issues them. Implementations:
//   - NcclCommunicator (src/dist/nccl_communicator.h): libnccl, loaded at
//     run time, on one CUDA device per rank;
//   - ThreadGroup (src/dist/thread_group.h): ranks as threads of one
//     process (tests, and host loads split over threads);
//   - the Python package drives a torch.distributed group with the same
//     plan (weightlift/_group.py).
#pragma once

#include <cstdint>

#include "weightlift/status.h"

namespace weightlift {

class GroupTransport {
 public:
  virtual ~GroupTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank's BYTES at DATA become ROOT's. Blocks until this rank's part
  // is done or the transport's timeout passes (then IoError naming the
  // collective; the transport is unusable afterwards).
  virtual Status Broadcast(void* data, uint64_t bytes, int root) = 0;

  // In place: before, rank r's PART_BYTES sit at DATA + r * PART_BYTES;
  // after, every rank has all SIZE parts. Same blocking and timeout.
  virtual Status AllGather(void* data, uint64_t part_bytes) = 0;
};

}  // namespace weightlift

#include "weightlift/checkpoint.h"
#include "weightlift/loader.h"
#include "weightlift/tensor_parallel.h"

namespace weightlift {

struct GroupLoadRequest {
  // false: every rank ends with every full tensor, each reading about 1/n
  // of the bytes. true: each rank gets its parts under `tp` (whose rank
  // and size must be the group's), replicated tensors read once in the
  // group.
  bool tensor_parallel = false;
  TensorParallel tp;
  uint64_t allgather_min_bytes = 4u << 20;  // see GroupPlanOptions
  uint64_t batch_bytes = 256u << 20;
};

// Loads CKPT on this rank of GROUP with LOADER (whose device is this rank's
// own and the memory the transport moves: host for ThreadGroup, the CUDA
// device for NcclCommunicator). Before any data moves the ranks all-gather
// a fingerprint of the request and the checkpoint, and a rank that cannot
// start says so: disagreement or a failed rank is InvalidArgument on every
// rank, naming the ranks. Tensors come in checkpoint order, each in memory
// this call allocated (one allocation, 256-byte aligned tensors); the
// report counts this rank's reads (bytes_read) and notes what the group
// delivered.
StatusOr<LoadResult> LoadWithGroup(Loader& loader, const Checkpoint& ckpt,
                                   GroupTransport& group,
                                   const GroupLoadRequest& request);

}  // namespace weightlift
