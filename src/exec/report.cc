// LoadReport rendering and LoadResult::Find.
#include "weightlift/report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "weightlift/loader.h"

namespace weightlift {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? std::to_string(b) + " B" : Fixed(v, 2) + " " + units[u];
}

}  // namespace

std::span<const ReadCounts::Field> ReadCounts::Fields() {
  static constexpr Field kFields[] = {
      {"direct_reads", &ReadCounts::direct_reads},
      {"bounced_reads", &ReadCounts::bounced_reads},
      {"registered_buffer_reads", &ReadCounts::registered_buffer_reads},
      {"slices", &ReadCounts::slices},
      {"contiguous_slices", &ReadCounts::contiguous_slices},
      {"row_run_slices", &ReadCounts::row_run_slices},
      {"row_run_reads", &ReadCounts::row_run_reads},
      {"strided_slices", &ReadCounts::strided_slices},
      {"strided_rows", &ReadCounts::strided_rows},
      {"slice_bytes_selected", &ReadCounts::slice_bytes_selected},
      {"slice_bytes_read", &ReadCounts::slice_bytes_read},
      {"slice_read_cost_bytes", &ReadCounts::slice_read_cost_bytes}};
  return kFields;
}

std::string LoadReport::ToString() const {
  std::string s;
  s += "device " + device.ToString() + ": " + std::to_string(tensors) +
       " tensors, " + Bytes(bytes) + " in " + Fixed(seconds, 3) + " s (" +
       Fixed(gb_per_s(), 2) + " GB/s)\n";
  s += "  read " + Bytes(bytes_read) + " from storage, " +
       std::to_string(threads) + " threads, staging " + Bytes(staging_bytes);
  if (device_bytes > 0) s += ", device memory " + Bytes(device_bytes);
  s += "\n";
  if (options) s += "  options: " + options->ToString() + "\n";
  s += "  phases: ";
  if (setup_seconds > 0) {
    s += "setup (loader creation) " + Fixed(setup_seconds, 3) + " s, ";
  }
  s += "open " + Fixed(open_seconds, 3) + " s, alloc " +
       Fixed(alloc_seconds, 3) + " s, transfer " + Fixed(transfer_seconds, 3) +
       " s\n";
  for (const FileReport& f : files) {
    s += "  " + f.path + ": " + f.path_taken + " (" + f.reason + "), " +
         Bytes(f.bytes) + "\n";
  }
  for (const std::string& n : notes) s += "  note: " + n + "\n";
  return s;
}

std::string LoadReport::ToJson() const {
  nlohmann::json j;
  j["device"] = device.ToString();
  j["tensors"] = tensors;
  j["bytes"] = bytes;
  j["bytes_read"] = bytes_read;
  j["seconds"] = seconds;
  j["gb_per_s"] = gb_per_s();
  j["setup_seconds"] = setup_seconds;
  j["open_seconds"] = open_seconds;
  j["alloc_seconds"] = alloc_seconds;
  j["transfer_seconds"] = transfer_seconds;
  j["staging_bytes"] = staging_bytes;
  j["device_bytes"] = device_bytes;
  j["threads"] = threads;
  // The options in effect, by their SetLoadOption names; sizes in bytes,
  // 0 = automatic where the knob allows it; null when not recorded.
  if (options) {
    const LoadOptions& o = *options;
    j["options"] = {
        {"device", o.device.ToString()},
        {"backend", BackendName(o.backend)},
        {"gds", GdsModeName(o.gds)},
        {"host_register", HostRegisterModeName(o.host_register)},
        {"threads", o.threads},
        {"chunk", o.chunk_bytes},
        {"cuda_chunk", o.cuda_chunk_bytes},
        {"staging", o.staging_bytes},
        {"queue_depth", o.queue_depth},
        {"direct_min_bytes", o.direct_min_bytes},
        {"copy_streams", o.copy_streams},
        {"resident_threshold", o.resident_threshold},
        {"zero_copy", o.zero_copy},
        {"host_register_piece", o.host_register_piece_bytes},
        {"host_buffer_cache", o.host_buffer_cache_bytes},
        {"uring_register_min", o.uring_register_min_bytes},
        {"local_world_size", o.local_world_size},
    };
  } else {
    j["options"] = nullptr;
  }
  nlohmann::json fs = nlohmann::json::array();
  for (const FileReport& f : files) {
    fs.push_back({{"path", f.path},
                  {"path_taken", f.path_taken},
                  {"reason", f.reason},
                  {"bytes", f.bytes},
                  {"copied_row_runs", f.copied_row_runs},
                  {"copied_row_reads", f.copied_row_reads}});
  }
  j["files"] = std::move(fs);
  nlohmann::json cs = nlohmann::json::object();
  for (const auto& [name, member] : ReadCounts::Fields()) {
    cs[std::string(name)] = counts.*member;
  }
  j["counts"] = std::move(cs);
  j["notes"] = notes;
  // Paths need not be UTF-8; replace invalid bytes rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const LoadedTensor* LoadResult::Find(std::string_view name) const {
  for (const LoadedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace weightlift
