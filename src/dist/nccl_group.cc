// The public NCCL entry points (weightlift/nccl.h) over NcclCommunicator,
// which exists only in builds with CUDA.
#include <cstring>

#include "weightlift/nccl.h"

#ifdef WL_HAVE_NCCL_COMMUNICATOR
#include "dist/nccl_communicator.h"
#endif

namespace weightlift {
namespace {

#ifndef WL_HAVE_NCCL_COMMUNICATOR
Status NoCuda(const char* what) {
  return Status::Unsupported(std::string(what) +
                             ": this build of weightlift has no CUDA, and an "
                             "NCCL group needs it");
}
#endif

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string NcclIdToHex(const NcclId& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * id.bytes.size());
  for (std::byte b : id.bytes) {
    const auto v = static_cast<unsigned>(b);
    hex.push_back(kDigits[v >> 4]);
    hex.push_back(kDigits[v & 15]);
  }
  return hex;
}

StatusOr<NcclId> NcclIdFromHex(std::string_view hex) {
  NcclId id;
  if (hex.size() != 2 * id.bytes.size()) {
    return Status::InvalidArgument(
        "NCCL id: want " + std::to_string(2 * id.bytes.size()) +
        " hex digits, got " + std::to_string(hex.size()) + " characters");
  }
  for (size_t i = 0; i < id.bytes.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument(
          "NCCL id: character " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1) +
          " is not a hex digit");
    }
    id.bytes[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return id;
}

StatusOr<NcclId> MakeNcclId() {
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  WL_ASSIGN_OR_RETURN(internal::NcclUniqueId made,
                      internal::NcclCommunicator::MakeUniqueId());
  static_assert(sizeof(made.internal) == sizeof(NcclId::bytes));
  NcclId id;
  std::memcpy(id.bytes.data(), made.internal, id.bytes.size());
  return id;
#else
  return NoCuda("MakeNcclId");
#endif
}

StatusOr<std::unique_ptr<GroupTransport>> JoinNcclGroup(
    const NcclId& id, int rank, int size, int device,
    std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return Status::InvalidArgument(
        "JoinNcclGroup: rank " + std::to_string(rank) + " of " +
        std::to_string(size) + " (want 0 <= rank < size)");
  }
  // The deadlines are now + TIMEOUT on the steady clock: a week keeps them
  // far inside its range (milliseconds::max() would overflow).
  if (timeout < std::chrono::milliseconds(1) ||
      timeout > std::chrono::hours(7 * 24)) {
    return Status::InvalidArgument("JoinNcclGroup: timeout " +
                                   std::to_string(timeout.count()) +
                                   " ms (want 1 ms to 7 days)");
  }
  if (device < 0) {
    return Status::InvalidArgument("JoinNcclGroup: device " +
                                   std::to_string(device));
  }
#ifdef WL_HAVE_NCCL_COMMUNICATOR
  internal::NcclUniqueId nid;
  std::memcpy(nid.internal, id.bytes.data(), id.bytes.size());
  WL_ASSIGN_OR_RETURN(
      std::unique_ptr<internal::NcclCommunicator> comm,
      internal::NcclCommunicator::Create(nid, rank, size, device, timeout));
  return std::unique_ptr<GroupTransport>(std::move(comm));
#else
  (void)id;
  (void)timeout;
  return NoCuda("JoinNcclGroup");
#endif
}

}  // namespace weightlift
