// NcclCommunicator: a GroupTransport over NCCL on one CUDA device per rank.
// libnccl is loaded at run time (src/dist/nccl_lib.h), so a build or a
// machine without NCCL still works and Create() says why it cannot.
#pragma once

#include <chrono>
#include <memory>

#include "dist/nccl_lib.h"
#include "weightlift/group.h"

namespace weightlift::internal {

class NcclCommunicator : public GroupTransport {
 public:
  // The id rank 0 makes and hands to every rank out of band (a
  // torch.distributed broadcast, a file, an environment variable).
  static StatusOr<NcclUniqueId> MakeUniqueId();

  // Joins ID's communicator as RANK of SIZE on CUDA device DEVICE: the
  // calling thread's current device becomes DEVICE and no other device is
  // touched. Joining waits at most TIMEOUT for every rank (the
  // non-blocking ncclCommInitRankConfig, polled; aborted at the deadline;
  // a library older than NCCL 2.14 has only the blocking init, without a
  // timeout). Every collective waits at most TIMEOUT, then aborts the
  // communicator at once (so the kernel ends and its memory can be freed)
  // and fails; the communicator is unusable after.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const NcclUniqueId& id, int rank, int size, int device,
      std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::optional<Device> memory_device() const override {
    return Device::Cuda(device_);
  }
  // DATA is device memory on this rank's device.
  Status Broadcast(void* data, uint64_t bytes, int root) override;
  Status AllGather(void* data, uint64_t part_bytes) override;
  // Every collective enqueued on the communicator's stream in order, then
  // one wait for the stream (within the timeout).
  Status RunAll(std::span<const GroupCollective> collectives,
                size_t* failed) override;

 private:
  NcclCommunicator(const NcclLib* lib, NcclComm comm, void* stream, int rank,
                   int size, int device, std::chrono::milliseconds timeout);
  // InvalidArgument unless ROOT is a rank of the group.
  Status CheckRoot(int root) const;
  // Enqueue, then Wait.
  Status Issue(const NcclCall& call, const char* what);
  // CALL on the stream; returns once NCCL has enqueued it (a non-blocking
  // communicator may take a while: ncclInProgress), so the next call may
  // be made.
  Status Enqueue(const NcclCall& call, const char* what);
  // Until the stream is idle (UNTIL_DONE; else until NCCL has enqueued
  // what was called), NCCL reports an error, or the timeout.
  Status Wait(const char* what, bool until_done = true);
  // ncclCommAbort, once; the communicator is broken after.
  void Abort();

  const NcclLib* lib_;
  NcclComm comm_;
  void* stream_;  // cudaStream_t
  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  bool broken_ = false;
  bool aborted_ = false;
};

}  // namespace weightlift::internal
