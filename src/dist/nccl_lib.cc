#include "dist/nccl_lib.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace weightlift::internal {
namespace {

template <typename F>
bool Bind(void* dl, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(dl, name));
  return *out != nullptr;
}

StatusOr<const NcclLib*> Load() {
  void* dl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!dl) dl = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* why = dlerror();
    return Status::Unsupported(std::string("NCCL unavailable: cannot load "
                                           "libnccl.so.2 (") +
                               (why ? why : "not found") + ")");
  }
  auto* lib = new NcclLib();  // process lifetime, like the mapping
  const char* missing = nullptr;
  if (!Bind(dl, "ncclGetVersion", &lib->get_version))
    missing = "ncclGetVersion";
  else if (!Bind(dl, "ncclGetUniqueId", &lib->get_unique_id))
    missing = "ncclGetUniqueId";
  else if (!Bind(dl, "ncclCommInitRank", &lib->comm_init_rank))
    missing = "ncclCommInitRank";
  else if (!Bind(dl, "ncclCommDestroy", &lib->comm_destroy))
    missing = "ncclCommDestroy";
  else if (!Bind(dl, "ncclCommAbort", &lib->comm_abort))
    missing = "ncclCommAbort";
  else if (!Bind(dl, "ncclCommGetAsyncError", &lib->comm_get_async_error))
    missing = "ncclCommGetAsyncError";
  else if (!Bind(dl, "ncclGetErrorString", &lib->get_error_string))
    missing = "ncclGetErrorString";
  else if (!Bind(dl, "ncclBroadcast", &lib->broadcast))
    missing = "ncclBroadcast";
  else if (!Bind(dl, "ncclAllGather", &lib->all_gather))
    missing = "ncclAllGather";
  if (!missing) {  // optional: libraries older than 2.14 lack it
    Bind(dl, "ncclCommInitRankConfig", &lib->comm_init_rank_config);
  }
  if (missing) {
    delete lib;
    dlclose(dl);
    return Status::Unsupported(
        std::string("NCCL unavailable: libnccl has no ") + missing);
  }
  return lib;
}

}  // namespace

StatusOr<const NcclLib*> NcclLib::Get() {
  static std::once_flag once;
  static StatusOr<const NcclLib*>* result = nullptr;
  std::call_once(once, [] { result = new StatusOr<const NcclLib*>(Load()); });
  return *result;
}

std::string NcclLib::ErrorText(int result) const {
  static const char* const kNames[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress"};
  const char* name = result >= 0 && result < 8 ? kNames[result] : "ncclError";
  const char* text = get_error_string ? get_error_string(result) : nullptr;
  return std::string(name) + " (" + std::to_string(result) + ")" +
         (text ? std::string(": ") + text : "");
}

NcclCall BroadcastCall(void* data, uint64_t bytes, int root) {
  NcclCall c;
  c.op = NcclCall::Op::kBroadcast;
  c.sendbuff = data;
  c.recvbuff = data;
  c.count = static_cast<size_t>(bytes);
  c.root = root;
  return c;
}

NcclCall AllGatherCall(void* data, uint64_t part_bytes, int rank) {
  NcclCall c;
  c.op = NcclCall::Op::kAllGather;
  c.sendbuff =
      static_cast<char*>(data) + static_cast<uint64_t>(rank) * part_bytes;
  c.recvbuff = data;
  c.count = static_cast<size_t>(part_bytes);
  return c;
}

}  // namespace weightlift::internal
