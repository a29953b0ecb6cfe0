// libnccl, loaded with dlopen at run time (never linked, no nccl.h needed):
// the few ABI types and entry points a group load uses, from NCCL's
// documented C API (nccl.h, NCCL 2.x).
#pragma once

#include <cstddef>
#include <cstdint>

#include "weightlift/status.h"

namespace weightlift::internal {

using NcclComm = void*;  // ncclComm_t
struct NcclUniqueId {    // ncclUniqueId
  char internal[128];
};
inline constexpr int kNcclSuccess = 0;     // ncclSuccess
inline constexpr int kNcclInProgress = 7;  // ncclInProgress
inline constexpr int kNcclUint8 = 1;       // ncclUint8

// ncclConfig_t as NCCL 2.14 defined it (the first version with
// ncclCommInitRankConfig). NCCL reads `size` bytes of the caller's struct
// and takes every later field at its default, so this prefix stays valid
// with newer libraries; `version` 2.14.0 tells it which fields are set.
struct NcclConfig {
  size_t size = sizeof(NcclConfig);
  unsigned int magic = 0xcafebeef;  // what NCCL_CONFIG_INITIALIZER sets
  unsigned int version = 21400;     // NCCL_VERSION(2, 14, 0)
  int blocking = 0;                 // 0: calls return ncclInProgress
};

// The process-wide libnccl.so.2: dlopen'ed on first use. Thread-safe.
struct NcclLib {
  // The library, or Unsupported naming why (not found, a symbol missing).
  // The result is cached.
  static StatusOr<const NcclLib*> Get();

  int (*get_version)(int*) = nullptr;
  int (*get_unique_id)(NcclUniqueId*) = nullptr;
  int (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
  // NCCL >= 2.14 (nullptr before): a non-blocking init that can time out.
  int (*comm_init_rank_config)(NcclComm*, int, NcclUniqueId, int,
                               NcclConfig*) = nullptr;
  int (*comm_destroy)(NcclComm) = nullptr;
  int (*comm_abort)(NcclComm) = nullptr;
  int (*comm_get_async_error)(NcclComm, int*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
  int (*broadcast)(const void*, void*, size_t, int, int, NcclComm,
                   void* stream) = nullptr;
  int (*all_gather)(const void*, void*, size_t, int, NcclComm,
                    void* stream) = nullptr;

  // "ncclSystemError (2): <the library's text>".
  std::string ErrorText(int result) const;
};

// One NCCL call a collective becomes (kept apart from the calls so the
// translation is tested without a GPU).
struct NcclCall {
  enum class Op : uint8_t { kBroadcast, kAllGather };
  Op op = Op::kBroadcast;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // elements of ncclUint8
  int root = -1;
};
// Broadcast in place: send == recv == DATA, BYTES elements from ROOT.
NcclCall BroadcastCall(void* data, uint64_t bytes, int root);
// All-gather in place: rank RANK sends its part at DATA + RANK * PART and
// receives all parts at DATA (NCCL's documented in-place form).
NcclCall AllGatherCall(void* data, uint64_t part_bytes, int rank);

}  // namespace weightlift::internal
