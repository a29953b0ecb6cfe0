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
//   - the Python package's TorchGroupTransport (weightlift/_group.py): a
//     torch.distributed group (gloo or NCCL) behind this interface, so
//     Python runs this same LoadWithGroup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "weightlift/options.h"
#include "weightlift/status.h"

namespace weightlift {

// One collective of a list a transport runs (GroupTransport::RunAll).
struct GroupCollective {
  enum class Kind : uint8_t { kBroadcast, kAllGather };
  Kind kind = Kind::kBroadcast;
  // Broadcast: the buffer. All-gather: the whole buffer, rank r's part at
  // DATA + r * BYTES.
  void* data = nullptr;
  uint64_t bytes = 0;  // broadcast: the buffer's bytes; all-gather: a part
  int root = -1;       // broadcast only
};

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

  // Runs COLLECTIVES in order (every rank passes the same list, their
  // buffers distinct) and returns once all are done. A transport may issue
  // them all before it waits, so the list costs one wait instead of one
  // per collective (a round trip each: most of what a small broadcast
  // costs); its timeout then applies to the list as a whole. On failure
  // *FAILED (when not null) is the index of the collective that failed,
  // or the list's size when the transport cannot tell. Default: one at a
  // time through Broadcast and AllGather.
  virtual Status RunAll(std::span<const GroupCollective> collectives,
                        size_t* failed);

  // After a collective failed, MEMORY (what it, or any collective issued
  // before, was given) may still be written by work the transport could
  // not stop (torch's gloo work outlives a timed-out wait). A group load
  // hands its memory here before letting go of it; a transport whose
  // failed work may still run keeps it as long as that work can. Default:
  // nothing, for transports that stop their work before a collective
  // returns (NcclCommunicator aborts, ThreadGroup copies synchronously).
  virtual void Retain(std::shared_ptr<void> memory) { (void)memory; }

  // Where the memory this transport moves must be: the host (ThreadGroup's
  // memcpys), or its CUDA device (NcclCommunicator's). LoadWithGroup
  // refuses a loader whose device differs, in the agreement, instead of
  // handing the transport memory it cannot use. Default: unknown (not
  // checked).
  virtual std::optional<Device> memory_device() const { return std::nullopt; }
};

}  // namespace weightlift

#include <functional>
#include <string>
#include <vector>

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
  // Bytes of tensors per batch; 0: automatic (about 8 batches, none under
  // 256 MiB: each batch has a fixed cost, src/plan/group_plan.h).
  uint64_t batch_bytes = 0;
  // The tensors to load, by name (checkpoint order whatever the order
  // here); empty: every tensor. Every rank must name the same ones.
  std::vector<std::string> names;
  // Optional: each tensor once final on this rank, just before on_ready,
  // as the LoadedTensor the result will hold (sharing its memory): for
  // callers that hand tensors out while the load runs. Calling thread.
  std::function<void(size_t index, const LoadedTensor& tensor)> on_tensor;
};

// The agreement a group load starts with: every rank's MINE (OK, or why
// it cannot start) and FINGERPRINT (GroupFingerprint) are all-gathered
// through memory on DEVICE. A failed rank, or ranks whose fingerprints
// differ, make it InvalidArgument on every rank, naming the ranks; a rank
// that failed gets its own MINE back. A rank that cannot even open the
// checkpoint calls it with its error so the others fail with the reason
// instead of waiting for it.
Status AgreeOnGroupLoad(GroupTransport& group, const Device& device,
                        const Status& mine, const std::string& fingerprint);

// Loads CKPT on this rank of GROUP with LOADER (whose device is this rank's
// own and the memory the transport moves: host for ThreadGroup, the CUDA
// device for NcclCommunicator). Before any data moves the ranks all-gather
// a fingerprint of the request and the checkpoint, and a rank that cannot
// start says so: disagreement or a failed rank is InvalidArgument on every
// rank, naming the ranks. Tensors come in checkpoint order, in one
// allocation of this call (256-byte aligned tensors): this rank's parts
// (tensor_parallel) with the shape Loader::LoadSlices gives them, the
// others whole; the report counts this rank's reads (bytes_read) and notes
// what the group delivered. The plan runs in batches: this rank's reads of
// every batch are one load on a thread of this call, and each batch's
// collectives (on the calling thread) start once its reads are in place,
// while later batches' reads go on. CALLBACKS.on_ready(i, tensor) comes,
// on the calling thread, for each tensor once its bytes are final on this
// rank (a batch at a time), and on_progress with the bytes final so far.
// CALLBACKS.cancel, once true, stops this rank's reads; the rank then fails
// the next batch's status exchange with Cancelled, so every rank stops. On
// an error every rank stops at its first failed collective; the memory
// goes to GROUP.Retain.
StatusOr<LoadResult> LoadWithGroup(Loader& loader, const Checkpoint& ckpt,
                                   GroupTransport& group,
                                   const GroupLoadRequest& request,
                                   const LoadCallbacks& callbacks = {});

}  // namespace weightlift
