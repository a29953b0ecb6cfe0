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
