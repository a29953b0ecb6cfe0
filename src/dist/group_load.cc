// LoadWithGroup (include/weightlift/group.h): agreement, the group plan,
// this rank's reads through Loader::LoadInto (PartReads), then each batch's
// collectives (RunBatch).
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dist/group_exec.h"
#include "dist/group_memory.h"
#include "dist/part_reads.h"
#include "plan/group_plan.h"
#include "weightlift/group.h"

namespace weightlift {
namespace {

using internal::Delivery;

constexpr uint64_t kRecord = 128;  // status, fingerprint, error text
constexpr uint64_t kAlign = 256;

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// All-gathers every rank's record; the first error found, else OK.
Status Agree(GroupTransport& group, const Device& device, const Status& mine,
             const std::string& fingerprint) {
  const int n = group.size();
  const int r = group.rank();
  std::vector<char> host(kRecord * static_cast<uint64_t>(n), 0);
  char* rec = host.data() + kRecord * static_cast<uint64_t>(r);
  rec[0] = mine.ok() ? 1 : 2;
  std::memcpy(rec + 1, fingerprint.data(),
              std::min<size_t>(32, fingerprint.size()));
  const std::string text = mine.ok() ? "" : mine.ToString();
  std::memcpy(rec + 33, text.data(),
              std::min<size_t>(kRecord - 34, text.size()));
  WL_ASSIGN_OR_RETURN(std::shared_ptr<void> buf,
                      internal::AllocateOn(device, host.size()));
  char* mine_at =
      static_cast<char*>(buf.get()) + kRecord * static_cast<uint64_t>(r);
  WL_RETURN_IF_ERROR(internal::CopyIn(device, mine_at, rec, kRecord));
  Status s = group.AllGather(buf.get(), kRecord);
  if (!s.ok()) {
    return Status(s.code(),
                  "group load: the agreement on the plan and the "
                  "checkpoint failed: " +
                      s.message());
  }
  WL_RETURN_IF_ERROR(
      internal::CopyOut(device, host.data(), buf.get(), host.size()));
  if (!mine.ok()) return mine;
  std::string failed;
  std::map<std::string, std::string> prints;  // fingerprint -> ranks
  for (int k = 0; k < n; ++k) {
    const char* other = host.data() + kRecord * static_cast<uint64_t>(k);
    if (other[0] != 1) {
      failed += (failed.empty() ? "" : "; ") + std::string("rank ") +
                std::to_string(k) + " could not start the load: " +
                std::string(other + 33, strnlen(other + 33, kRecord - 34));
      continue;
    }
    std::string& ranks = prints[std::string(other + 1, 32)];
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(k);
  }
  if (!failed.empty()) return Status::InvalidArgument("group load: " + failed);
  if (prints.size() > 1) {
    std::string what;
    for (const auto& [fp, ranks] : prints) {
      what += (what.empty() ? "" : "; ") + std::string("ranks [") + ranks +
              "] have " + fp;
    }
    return Status::InvalidArgument(
        "group load: ranks disagree on the plan or the checkpoint "
        "(fingerprint of mode, tp_size, tp_plan and every tensor's name, "
        "dtype, shape, file, offset and size): " +
        what);
  }
  return Status::OK();
}

}  // namespace

StatusOr<LoadResult> LoadWithGroup(Loader& loader, const Checkpoint& ckpt,
                                   GroupTransport& group,
                                   const GroupLoadRequest& request) {
  const int n = group.size();
  const int r = group.rank();
  const Device device = loader.options().device;
  const auto& tensors = ckpt.tensors();

  // Everything that can fail on one rank alone, before the agreement.
  Status local = Status::OK();
  TensorParallel tp = request.tp;
  std::optional<ShardedTensors> shards;
  if (request.tensor_parallel) {
    if (tp.size != n || tp.rank != r) {
      local = Status::InvalidArgument(
          "group load: the group has " + std::to_string(n) +
          " ranks and this is rank " + std::to_string(r) + ", but tp_size=" +
          std::to_string(tp.size) + ", tp_rank=" + std::to_string(tp.rank));
    } else {
      StatusOr<ShardedTensors> s = ShardTensors(tensors, tp);
      if (s.ok()) {
        shards = std::move(*s);
      } else {
        local = s.status();
      }
    }
  } else {
    tp = TensorParallel{};
    tp.size = n;
    tp.rank = r;
  }
  WL_RETURN_IF_ERROR(
      Agree(group, device, local,
            internal::GroupFingerprint(tensors, ckpt.files(),
                                       request.tensor_parallel, tp)));

  internal::GroupPlanOptions popts;
  popts.allgather_min_bytes = request.allgather_min_bytes;
  popts.batch_bytes = request.batch_bytes;
  const internal::GroupPlan plan =
      shards ? internal::PlanShardedGroup(tensors, *shards, n, popts)
             : internal::PlanFullGroup(tensors, n, popts);

  // One allocation: each tensor (or this rank's part) 256-byte aligned.
  std::vector<uint64_t> sizes(tensors.size());
  std::vector<uint64_t> offsets(tensors.size());
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    sizes[i] = plan.steps[i].delivery == Delivery::kLocal
                   ? shards->shards[i].bytes
                   : tensors[i].size;
    offsets[i] = total;
    total += AlignUp(sizes[i]);
  }
  WL_ASSIGN_OR_RETURN(std::shared_ptr<void> memory,
                      internal::AllocateOn(device, total));
  const auto base = reinterpret_cast<uintptr_t>(memory.get());
  std::vector<void*> buffers(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    buffers[i] = reinterpret_cast<void*>(base + offsets[i]);
  }

  LoadReport report;
  report.device = device;
  std::vector<std::string> notes;
  for (uint32_t b = 0; b < plan.batches; ++b) {
    internal::PartReads reads;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const internal::GroupStep& s = plan.steps[i];
      if (s.batch != b) continue;
      const TensorInfo& t = tensors[i];
      const uintptr_t dst = base + offsets[i];
      if (s.delivery == Delivery::kLocal) {
        reads.AddShard(t, shards->shards[i], dst);
      } else if (s.delivery == Delivery::kBroadcast && s.root == r) {
        reads.Add(t, 0, 1, t.size, t.size, t.shape, dst);
      } else if (s.delivery == Delivery::kAllGather) {
        std::vector<uint64_t> part_shape = t.shape;
        part_shape[0] = s.part_rows;
        const uint64_t at = static_cast<uint64_t>(r) * s.part_bytes;
        reads.Add(t, at, 1, s.part_bytes, s.part_bytes, part_shape, dst + at);
      }
    }
    if (!reads.empty()) {
      const Checkpoint parts = reads.ToCheckpoint(ckpt);
      const std::vector<Destination> dests = reads.Destinations();
      LoadReport batch_report;
      WL_RETURN_IF_ERROR(loader.LoadInto(parts, dests, &batch_report));
      report.bytes_read += batch_report.bytes_read;
      report.transfer_seconds += batch_report.transfer_seconds;
      report.staging_bytes =
          std::max(report.staging_bytes, batch_report.staging_bytes);
      report.threads = std::max(report.threads, batch_report.threads);
      if (b == 0) report.files = batch_report.files;
    }
    WL_RETURN_IF_ERROR(internal::RunBatch(plan, tensors, b, buffers, group));
  }

  LoadResult result;
  result.tensors.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    LoadedTensor lt;
    lt.name = tensors[i].name;
    lt.dtype = tensors[i].dtype;
    lt.shape = plan.steps[i].delivery == Delivery::kLocal
                   ? shards->shards[i].shape
                   : tensors[i].shape;
    lt.device = device;
    lt.data = buffers[i];
    lt.size = sizes[i];
    lt.owner = memory;
    report.bytes += sizes[i];
    result.tensors.push_back(std::move(lt));
  }
  report.tensors = tensors.size();
  report.device_bytes = device.is_cuda() ? total : 0;
  report.notes.push_back(
      "group: rank " + std::to_string(r) + " of " + std::to_string(n) +
      ": read " + std::to_string(report.bytes_read) + " bytes; " +
      std::to_string(plan.broadcast_bytes) + " bytes broadcast and " +
      std::to_string(plan.allgather_bytes) + " all-gathered in the group, " +
      std::to_string(plan.batches) + " batches");
  if (shards) {
    for (const std::string& w : shards->warnings) {
      report.notes.push_back("tp: warning: " + w);
    }
  }
  result.report = std::move(report);
  return result;
}

}  // namespace weightlift
