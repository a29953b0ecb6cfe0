#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>

#include <string>
#include <thread>

namespace weightlift::internal {
namespace {

Status CudaStatus(cudaError_t e, const std::string& what) {
  return Status::CudaError(what + ": " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

}  // namespace

StatusOr<NcclUniqueId> NcclCommunicator::MakeUniqueId() {
  WL_ASSIGN_OR_RETURN(const NcclLib* lib, NcclLib::Get());
  NcclUniqueId id{};
  const int r = lib->get_unique_id(&id);
  if (r != kNcclSuccess) {
    return Status::IoError("ncclGetUniqueId: " + lib->ErrorText(r));
  }
  return id;
}

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclUniqueId& id, int rank, int size, int device,
    std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument("NCCL communicator: rank " +
                                   std::to_string(rank) + " of " +
                                   std::to_string(size));
  }
  WL_ASSIGN_OR_RETURN(const NcclLib* lib, NcclLib::Get());
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    return CudaStatus(
        e, "NCCL communicator: cudaSetDevice(" + std::to_string(device) + ")");
  }
  cudaStream_t stream = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    return CudaStatus(e, "NCCL communicator: cudaStreamCreate on cuda:" +
                             std::to_string(device));
  }
  NcclComm comm = nullptr;
  const std::string who = "rank " + std::to_string(rank) + " of " +
                          std::to_string(size) +
                          " on cuda:" + std::to_string(device);
  if (!lib->comm_init_rank_config) {
    // NCCL < 2.14: only the blocking init exists, which waits for every
    // rank without a timeout; the collectives still have theirs.
    const int r = lib->comm_init_rank(&comm, size, id, rank);
    if (r != kNcclSuccess) {
      cudaStreamDestroy(stream);
      return Status::IoError("ncclCommInitRank (" + who +
                             "): " + lib->ErrorText(r));
    }
  } else {
    // Non-blocking: the init proceeds in NCCL's threads while this one
    // polls it against the deadline, and aborts it if a rank never joins.
    NcclConfig config;
    int r = lib->comm_init_rank_config(&comm, size, id, rank, &config);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(100);
    while ((r == kNcclSuccess || r == kNcclInProgress) && comm != nullptr) {
      int state = kNcclInProgress;
      const int q = lib->comm_get_async_error(comm, &state);
      r = q != kNcclSuccess ? q : state;
      if (r != kNcclInProgress) break;  // joined, or an error
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(pause);
      if (pause < std::chrono::milliseconds(10)) pause *= 2;
    }
    if (r != kNcclSuccess) {
      if (comm != nullptr) lib->comm_abort(comm);
      cudaStreamDestroy(stream);
      if (r == kNcclInProgress) {
        return Status::IoError(
            "ncclCommInitRankConfig (" + who + ") did not complete within " +
            std::to_string(timeout.count()) +
            " ms: not every rank joined the communicator (aborted)");
      }
      return Status::IoError("ncclCommInitRankConfig (" + who +
                             "): " + lib->ErrorText(r));
    }
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(lib, comm, stream, rank, size, device, timeout));
}

NcclCommunicator::NcclCommunicator(const NcclLib* lib, NcclComm comm,
                                   void* stream, int rank, int size, int device,
                                   std::chrono::milliseconds timeout)
    : lib_(lib),
      comm_(comm),
      stream_(stream),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout) {}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (broken_) {
    Abort();
  } else {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    lib_->comm_destroy(comm_);
  }
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status NcclCommunicator::CheckRoot(int root) const {
  if (root < 0 || root >= size_) {
    return Status::InvalidArgument("NCCL broadcast: root " +
                                   std::to_string(root) + " outside the group");
  }
  return Status::OK();
}

Status NcclCommunicator::Broadcast(void* data, uint64_t bytes, int root) {
  WL_RETURN_IF_ERROR(CheckRoot(root));
  return Issue(BroadcastCall(data, bytes, root), "ncclBroadcast");
}

Status NcclCommunicator::AllGather(void* data, uint64_t part_bytes) {
  return Issue(AllGatherCall(data, part_bytes, rank_), "ncclAllGather");
}

Status NcclCommunicator::RunAll(std::span<const GroupCollective> collectives,
                                size_t* failed) {
  // Every root checked before anything is enqueued: a refused list leaves
  // no collective running.
  for (size_t k = 0; k < collectives.size(); ++k) {
    if (collectives[k].kind != GroupCollective::Kind::kBroadcast) continue;
    if (Status s = CheckRoot(collectives[k].root); !s.ok()) {
      if (failed) *failed = k;
      return s;
    }
  }
  for (size_t k = 0; k < collectives.size(); ++k) {
    const GroupCollective& c = collectives[k];
    const Status s =
        c.kind == GroupCollective::Kind::kAllGather
            ? Enqueue(AllGatherCall(c.data, c.bytes, rank_), "ncclAllGather")
            : Enqueue(BroadcastCall(c.data, c.bytes, c.root), "ncclBroadcast");
    if (!s.ok()) {
      if (failed) *failed = k;
      return s;
    }
  }
  Status s = Wait("the batch's NCCL collectives");
  if (!s.ok() && failed) *failed = collectives.size();
  return s;
}

Status NcclCommunicator::Issue(const NcclCall& c, const char* what) {
  WL_RETURN_IF_ERROR(Enqueue(c, what));
  return Wait(what);
}

Status NcclCommunicator::Enqueue(const NcclCall& c, const char* what) {
  if (broken_) {
    return Status::IoError(std::string(what) +
                           ": the communicator was aborted earlier");
  }
  if (c.count == 0) return Status::OK();
  cudaSetDevice(device_);
  const int r = c.op == NcclCall::Op::kBroadcast
                    ? lib_->broadcast(c.sendbuff, c.recvbuff, c.count,
                                      kNcclUint8, c.root, comm_, stream_)
                    : lib_->all_gather(c.sendbuff, c.recvbuff, c.count,
                                       kNcclUint8, comm_, stream_);
  if (r != kNcclSuccess && r != kNcclInProgress) {
    Abort();
    return Status::IoError(std::string(what) + " of " +
                           std::to_string(c.count) +
                           " bytes: " + lib_->ErrorText(r));
  }
  if (r == kNcclSuccess) return Status::OK();
  // Non-blocking: no other NCCL call on this communicator until this one
  // is enqueued.
  return Wait(what, /*until_done=*/false);
}

void NcclCommunicator::Abort() {
  broken_ = true;
  if (!aborted_) {
    aborted_ = true;
    lib_->comm_abort(comm_);
  }
}

Status NcclCommunicator::Wait(const char* what, bool until_done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    // A non-blocking communicator may still be enqueueing the collective
    // (ncclInProgress): only after that is the stream's state meaningful.
    int async = kNcclSuccess;
    lib_->comm_get_async_error(comm_, &async);
    if (async != kNcclSuccess && async != kNcclInProgress) {
      Abort();
      return Status::IoError(
          std::string(what) + " on rank " + std::to_string(rank_) + " of " +
          std::to_string(size_) + ": " + lib_->ErrorText(async) + " (aborted)");
    }
    if (async == kNcclSuccess && !until_done) return Status::OK();
    if (async == kNcclSuccess) {
      const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
      if (e == cudaSuccess) return Status::OK();
      if (e != cudaErrorNotReady) {
        Abort();
        return CudaStatus(
            e, std::string(what) + " on cuda:" + std::to_string(device_));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // Aborted now, not later: the kernel waiting for the missing rank
      // ends, and the memory it was given can be freed without hanging.
      Abort();
      return Status::IoError(
          std::string(what) + " on rank " + std::to_string(rank_) + " of " +
          std::to_string(size_) +
          (until_done ? " did not complete within "
                      : " was not enqueued within ") +
          std::to_string(timeout_.count()) +
          " ms (a rank stopped or runs a different load; the communicator "
          "is aborted)");
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(1000)) pause *= 2;
  }
}

}  // namespace weightlift::internal
