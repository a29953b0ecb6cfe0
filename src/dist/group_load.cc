// LoadWithGroup (include/weightlift/group.h): agreement, the group plan,
// this rank's reads (its parts, the tensors it owns and its rows of the
// all-gathered ones: one Loader::LoadSlicesInto on a thread of its own,
// running ahead of the collectives), then each batch's collectives
// (RunBatch) once its reads are in place and the ranks have told each other
// their reads succeeded.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "dist/group_exec.h"
#include "dist/group_memory.h"
#include "dist/tensor_sample.h"
#include "plan/group_plan.h"
#include "util/clock.h"
#include "weightlift/group.h"

namespace weightlift {
namespace {

using internal::Delivery;

constexpr uint64_t kRecord = 512;  // status, fingerprint, error text
constexpr uint64_t kAlign = 256;

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Memory on DEVICE for one exchange's records (one per rank of GROUP).
StatusOr<std::shared_ptr<void>> AllocateRecords(GroupTransport& group,
                                                const Device& device) {
  return internal::AllocateOn(device,
                              kRecord * static_cast<uint64_t>(group.size()));
}

// All-gathers every rank's record (status, fingerprint, error text) through
// BUF (AllocateRecords; a load reuses it for each of its exchanges, so no
// batch pays for a device allocation and its cudaFree, which waits for the
// whole device); the first error found, else OK. WHAT names the step
// ("start the load", "read batch 3") in the error of a rank that failed it.
Status Exchange(GroupTransport& group, const Device& device,
                const std::shared_ptr<void>& buf, const Status& mine,
                const std::string& fingerprint, const std::string& what) {
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
  char* mine_at =
      static_cast<char*>(buf.get()) + kRecord * static_cast<uint64_t>(r);
  WL_RETURN_IF_ERROR(internal::CopyIn(device, mine_at, rec, kRecord));
  Status s = group.AllGather(buf.get(), kRecord);
  if (!s.ok()) {
    group.Retain(buf);
    return Status(s.code(), "group load: exchanging whether every rank could " +
                                what + " failed: " + s.message());
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
                std::to_string(k) + " could not " + what + ": " +
                std::string(other + 33, strnlen(other + 33, kRecord - 34));
      continue;
    }
    std::string& ranks = prints[std::string(other + 1, 32)];
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(k);
  }
  if (!failed.empty()) return Status::InvalidArgument("group load: " + failed);
  if (prints.size() > 1) {
    std::string what_differs;
    for (const auto& [fp, ranks] : prints) {
      what_differs += (what_differs.empty() ? "" : "; ") +
                      std::string("ranks [") + ranks + "] have " + fp;
    }
    return Status::InvalidArgument(
        "group load: ranks disagree on the plan or the checkpoint "
        "(fingerprint of mode, tp_size, tp_plan, the plan's batch and "
        "all-gather sizes, every tensor's name, dtype, shape, file, offset "
        "and size, and a sample of the tensors' bytes): " +
        what_differs);
  }
  return Status::OK();
}

// The checkpoint restricted to NAMES (in checkpoint order), or why not.
StatusOr<Checkpoint> Select(const Checkpoint& ckpt,
                            const std::vector<std::string>& names) {
  std::set<std::string_view> wanted(names.begin(), names.end());
  std::vector<TensorInfo> kept;
  for (const TensorInfo& t : ckpt.tensors()) {
    if (wanted.erase(t.name)) kept.push_back(t);
  }
  if (!wanted.empty()) {
    return Status::NotFound("group load: tensor '" +
                            std::string(*wanted.begin()) +
                            "' is not in the checkpoint (" +
                            std::to_string(wanted.size()) + " missing)");
  }
  return Checkpoint(ckpt.files(), std::move(kept), ckpt.index_path());
}

// This rank's reads of the whole load as one LoadSlicesInto, on a thread
// of its own, so that they run ahead of the collectives instead of
// stopping for each batch (each load pays its start and drain: on one
// H200 a group of one in 8 batches, a LoadInto and a LoadSlices each, took
// 308.5 ms against 261.7 ms for the plain load; session 17). Each request
// belongs to a batch (BATCH_OF); WaitForBatch(b) returns once every read
// of batch b is in place, or with the load's error. Cancel stops the reads
// (LoadCallbacks::cancel); the destructor cancels and joins, so nothing
// writes into the destinations once it is gone.
class GroupReads {
 public:
  // CALLER_CANCEL: the group load's own LoadCallbacks::cancel (may be
  // null), seen while waiting for a batch.
  GroupReads(Loader& loader, const Checkpoint& ckpt,
             std::vector<TensorRequest> requests,
             std::vector<Destination> dests, std::vector<uint32_t> batch_of,
             uint32_t batches, const std::atomic<bool>* caller_cancel)
      : caller_cancel_(caller_cancel),
        requests_(std::move(requests)),
        dests_(std::move(dests)),
        batch_of_(std::move(batch_of)),
        pending_(batches, 0) {
    for (uint32_t b : batch_of_) ++pending_[b];
    if (requests_.empty()) {
      ended_ = true;
      return;
    }
    try {
      thread_ = std::thread([this, &loader, &ckpt] { Run(loader, ckpt); });
    } catch (const std::system_error& e) {
      status_ = Status::ResourceExhausted(
          std::string("group load: cannot start the reading thread: ") +
          e.what());
      ended_ = true;
    }
  }
  GroupReads(const GroupReads&) = delete;
  GroupReads& operator=(const GroupReads&) = delete;
  ~GroupReads() {
    Cancel();
    if (thread_.joinable()) thread_.join();
  }

  // Batch B's reads are all in place: OK (a later read may have failed
  // since; its batch says so). The load failed first: its error. The
  // caller cancelled the group load: Cancelled, the reads cancelled too.
  // LAST (the final batch): waits for the whole load, whose last checks
  // (the files unchanged) come after the last tensor's arrival.
  Status WaitForBatch(uint32_t b, bool last) {
    std::unique_lock<std::mutex> lock(mu_);
    auto done = [&] { return ended_ || (!last && pending_[b] == 0); };
    while (true) {
      if (caller_cancel_ != nullptr && caller_cancel_->load()) {
        Cancel();
        return Status::Cancelled("the load was cancelled by its caller");
      }
      if (done()) break;
      if (caller_cancel_ == nullptr) {
        ready_.wait(lock, done);
      } else {
        // The caller's flag wakes no one: look at it every 20 ms.
        ready_.wait_for(lock, std::chrono::milliseconds(20), done);
      }
    }
    if (!last && pending_[b] == 0) return Status::OK();
    if (!status_.ok()) return status_;
    if (pending_[b] != 0) {
      return Status::Internal(
          "group load: the reads ended with " + std::to_string(pending_[b]) +
          " tensors of batch " + std::to_string(b) + " not reported in place");
    }
    return Status::OK();
  }
  void Cancel() { cancel_.store(true); }
  // After WaitForBatch(last): what the load read.
  const LoadReport& report() const { return report_; }

 private:
  void Run(Loader& loader, const Checkpoint& ckpt) {
    LoadCallbacks cb;
    cb.cancel = &cancel_;
    cb.on_ready = [this](size_t k, const TensorInfo&) {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_[batch_of_[k]] == 0) ready_.notify_all();
    };
    LoadReport report;
    Status s = loader.LoadSlicesInto(ckpt, requests_, dests_, &report, cb);
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(s);
    report_ = std::move(report);
    ended_ = true;
    ready_.notify_all();
  }

  const std::atomic<bool>* const caller_cancel_;
  const std::vector<TensorRequest> requests_;
  const std::vector<Destination> dests_;
  const std::vector<uint32_t> batch_of_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable ready_;
  std::vector<uint64_t> pending_;  // guarded by mu_: reads left per batch
  bool ended_ = false;             // guarded by mu_
  Status status_ = Status::OK();   // guarded by mu_
  LoadReport report_;              // guarded by mu_
  std::thread thread_;
};

}  // namespace

Status AgreeOnGroupLoad(GroupTransport& group, const Device& device,
                        const Status& mine, const std::string& fingerprint) {
  internal::OnDevice on(device);
  WL_ASSIGN_OR_RETURN(std::shared_ptr<void> records,
                      AllocateRecords(group, device));
  return Exchange(group, device, records, mine, fingerprint, "start the load");
}

StatusOr<LoadResult> LoadWithGroup(Loader& loader, const Checkpoint& whole,
                                   GroupTransport& group,
                                   const GroupLoadRequest& request,
                                   const LoadCallbacks& callbacks) {
  const auto t0 = internal::Clock::now();
  const int n = group.size();
  const int r = group.rank();
  const Device device = loader.options().device;
  // This thread (a job thread of its own, often) works on the rank's device
  // and on no other.
  internal::OnDevice on(device);

  // Everything that can fail on one rank alone, before the agreement.
  Status local = Status::OK();
  // The agreement's records go where the transport moves memory, so a rank
  // whose loader does not fit its transport still joins it and says so.
  const std::optional<Device> moves = group.memory_device();
  const Device comm = moves.value_or(device);
  if (moves && *moves != device) {
    local = Status::InvalidArgument(
        "group load: the loader loads to " + device.ToString() +
        " but the group's transport moves memory on " + moves->ToString() +
        " (give each rank a loader on its transport's device)");
  }
  std::optional<Checkpoint> selected;
  if (local.ok() && !request.names.empty()) {
    StatusOr<Checkpoint> s = Select(whole, request.names);
    if (s.ok()) {
      selected.emplace(std::move(*s));
    } else {
      local = s.status();
    }
  }
  const Checkpoint& ckpt = selected ? *selected : whole;
  const auto& tensors = ckpt.tensors();
  TensorParallel tp = request.tp;
  std::optional<ShardedTensors> shards;
  if (!local.ok()) {
    // reported in the agreement
  } else if (request.tensor_parallel) {
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
  // A sample of the tensors' bytes (read through WHOLE's open files):
  // ranks whose checkpoints share a layout but not their weights disagree.
  std::string sample;
  if (local.ok()) {
    StatusOr<std::string> s = internal::SampleTensorBytes(whole, tensors);
    if (s.ok()) {
      sample = std::move(*s);
    } else {
      local = s.status();
    }
  }
  internal::GroupPlanOptions popts;
  popts.allgather_min_bytes = request.allgather_min_bytes;
  popts.batch_bytes = request.batch_bytes;
  // The plan and this rank's memory come before the agreement too: a rank
  // that cannot allocate (the likeliest failure on a GPU) says so there,
  // instead of leaving the others to wait out the timeout at batch 0.
  internal::GroupPlan plan;
  std::vector<uint64_t> sizes(tensors.size());
  std::vector<uint64_t> offsets(tensors.size());
  uint64_t total = 0;
  uint64_t delivered = 0;
  std::shared_ptr<void> memory;
  if (local.ok()) {
    plan = shards ? internal::PlanShardedGroup(tensors, *shards, n, popts)
                  : internal::PlanFullGroup(tensors, n, popts);
    // One allocation for every tensor of the result: what the group
    // delivers, what this rank reads whole or by rows, and its own parts
    // (each tensor 256-byte aligned).
    for (size_t i = 0; i < tensors.size(); ++i) {
      const bool is_part = plan.steps[i].delivery == Delivery::kLocal;
      sizes[i] = is_part ? shards->shards[i].bytes : tensors[i].size;
      offsets[i] = total;
      total += AlignUp(sizes[i]);
      delivered += sizes[i];
    }
    StatusOr<std::shared_ptr<void>> m = internal::AllocateOn(device, total);
    if (m.ok()) {
      memory = std::move(*m);
    } else {
      local = m.status();
    }
  }
  WL_ASSIGN_OR_RETURN(std::shared_ptr<void> records,
                      AllocateRecords(group, comm));
  WL_RETURN_IF_ERROR(
      Exchange(group, comm, records, local,
               local.ok() ? internal::GroupFingerprint(tensors, ckpt.files(),
                                                       request.tensor_parallel,
                                                       tp, popts, sample)
                          : std::string(),
               "start the load"));

  const std::vector<TensorRequest> part_requests =
      shards ? ShardRequests(tensors, *shards) : std::vector<TensorRequest>();
  const auto base = reinterpret_cast<uintptr_t>(memory.get());
  std::vector<void*> buffers(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    buffers[i] = reinterpret_cast<void*>(base + offsets[i]);
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
    result.tensors.push_back(std::move(lt));
  }

  // This rank's reads, in tensor order (so the batches come in that
  // order): its parts (as slices), the tensors it owns, its rows of the
  // all-gathered ones.
  std::vector<TensorRequest> requests;
  std::vector<Destination> dests;
  std::vector<uint32_t> batch_of;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const internal::GroupStep& s = plan.steps[i];
    const TensorInfo& t = tensors[i];
    TensorRequest req;
    uint64_t at = 0;
    uint64_t bytes = sizes[i];
    if (s.delivery == Delivery::kLocal) {
      req = part_requests[i];
    } else if (s.delivery == Delivery::kBroadcast && s.root == r) {
      req.name = t.name;
    } else if (s.delivery == Delivery::kAllGather) {
      const uint64_t first = static_cast<uint64_t>(r) * s.part_rows;
      req.name = t.name;
      req.slices = {DimSlice{first, first + s.part_rows, 1}};
      at = static_cast<uint64_t>(r) * s.part_bytes;
      bytes = s.part_bytes;
    } else {
      continue;  // another rank reads it
    }
    if (bytes == 0) continue;  // nothing to read: no load for it alone
    requests.push_back(std::move(req));
    dests.push_back({t.name, static_cast<char*>(buffers[i]) + at, bytes});
    batch_of.push_back(s.batch);
  }
  GroupReads reads(loader, ckpt, std::move(requests), std::move(dests),
                   std::move(batch_of), plan.batches, callbacks.cancel);

  uint64_t done = 0;
  for (uint32_t b = 0; b < plan.batches; ++b) {
    Status read = reads.WaitForBatch(b, b + 1 == plan.batches);
    // Every rank learns whether every rank has its bytes of this batch, so
    // a rank whose read failed fails the group at once, with its reason.
    Status s = Exchange(group, comm, records, read, std::string(32, '-'),
                        "read its bytes of batch " + std::to_string(b));
    if (s.ok()) s = internal::RunBatch(plan, tensors, b, buffers, group);
    if (!s.ok()) {
      // This batch's error wins; the later batches' reads only must end.
      reads.Cancel();
      group.Retain(memory);
      return s;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (plan.steps[i].batch != b) continue;
      done += sizes[i];
      if (request.on_tensor) request.on_tensor(i, result.tensors[i]);
      if (callbacks.on_ready) callbacks.on_ready(i, tensors[i]);
    }
    if (callbacks.on_progress) callbacks.on_progress(done, delivered);
  }
  // This rank's one load: what it read, its phases, files, counts and
  // notes (the counted ones said once, at its end); the rest is the
  // group's. (Its options are the loader's: a group load's report has
  // none.)
  LoadReport report = reads.report();
  report.device = device;
  report.options.reset();
  report.bytes = delivered;
  report.tensors = tensors.size();
  report.device_bytes = device.is_cuda() ? total : 0;
  report.notes.insert(
      report.notes.begin(),
      "group: rank " + std::to_string(r) + " of " + std::to_string(n) +
          ": read " + std::to_string(report.bytes_read) + " bytes; " +
          std::to_string(plan.broadcast_bytes) + " bytes broadcast and " +
          std::to_string(plan.allgather_bytes) +
          " all-gathered in the group, " + std::to_string(plan.batches) +
          " batches");
  if (shards) {
    for (const std::string& w : shards->warnings) {
      report.notes.push_back("tp: warning: " + w);
    }
  }
  // As a loader's own reports: the whole call, its setup included.
  report.seconds = internal::SecondsSince(t0) + report.setup_seconds;
  result.report = std::move(report);
  return result;
}

}  // namespace weightlift
