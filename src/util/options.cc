// LoadOptions, Device, Backend and the modes: parsing, names, validation,
// SetLoadOption (the one text -> knob mapping) and the report's options line.
#include "weightlift/options.h"

#include <charconv>
#include <cstdio>
#include <string>

namespace weightlift {

StatusOr<Device> Device::Parse(std::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text == "cuda") return Device::Cuda(0);
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    std::string_view num = text.substr(kPrefix.size());
    int index = -1;
    const auto [end, ec] =
        std::from_chars(num.data(), num.data() + num.size(), index);
    if (!num.empty() && ec == std::errc() && end == num.data() + num.size() &&
        index >= 0 && num[0] != '+' && num[0] != '-') {
      return Device::Cuda(index);
    }
  }
  return Status::InvalidArgument("unknown device '" + std::string(text) +
                                 "' (expected cpu, cuda or cuda:N)");
}

std::string Device::ToString() const {
  return is_cuda() ? "cuda:" + std::to_string(index) : "cpu";
}

std::string_view BackendName(Backend b) {
  switch (b) {
    case Backend::kAuto:
      return "auto";
    case Backend::kPread:
      return "pread";
    case Backend::kDirect:
      return "direct";
    case Backend::kUring:
      return "uring";
    case Backend::kMmap:
      return "mmap";
  }
  return "unknown";
}

StatusOr<Backend> ParseBackend(std::string_view text) {
  for (Backend b : {Backend::kAuto, Backend::kPread, Backend::kDirect,
                    Backend::kUring, Backend::kMmap}) {
    if (text == BackendName(b)) return b;
  }
  if (text == "io_uring") return Backend::kUring;
  return Status::InvalidArgument("unknown backend '" + std::string(text) +
                                 "' (expected auto, pread, direct, uring or "
                                 "mmap)");
}

std::string_view GdsModeName(GdsMode m) {
  switch (m) {
    case GdsMode::kAuto:
      return "auto";
    case GdsMode::kOn:
      return "on";
    case GdsMode::kOff:
      return "off";
    case GdsMode::kCompat:
      return "compat";
  }
  return "unknown";
}

StatusOr<GdsMode> ParseGdsMode(std::string_view text) {
  for (GdsMode m :
       {GdsMode::kAuto, GdsMode::kOn, GdsMode::kOff, GdsMode::kCompat}) {
    if (text == GdsModeName(m)) return m;
  }
  return Status::InvalidArgument("unknown GDS mode '" + std::string(text) +
                                 "' (expected auto, on, off or compat)");
}

std::string_view HostRegisterModeName(HostRegisterMode m) {
  switch (m) {
    case HostRegisterMode::kAuto:
      return "auto";
    case HostRegisterMode::kOn:
      return "on";
    case HostRegisterMode::kOff:
      return "off";
  }
  return "unknown";
}

StatusOr<HostRegisterMode> ParseHostRegisterMode(std::string_view text) {
  for (HostRegisterMode m : {HostRegisterMode::kAuto, HostRegisterMode::kOn,
                             HostRegisterMode::kOff}) {
    if (text == HostRegisterModeName(m)) return m;
  }
  return Status::InvalidArgument("unknown host_register mode '" +
                                 std::string(text) +
                                 "' (expected auto, on, off or compat)");
}

namespace {

Status Bad(const char* knob, const std::string& value, const std::string& why) {
  return Status::InvalidArgument(std::string("option ") + knob + " = " + value +
                                 ": " + why);
}

}  // namespace

Status LoadOptions::Validate() const {
  constexpr size_t kMinChunk = 4096;
  constexpr size_t kMaxChunk = size_t{1} << 30;
  if (device.index < 0) {
    return Bad("device", device.ToString(), "negative device index");
  }
  if (device.kind == Device::Kind::kCpu && device.index != 0) {
    return Bad("device", std::to_string(device.index),
               "a cpu device has index 0");
  }
  if (threads < 0 || threads > 256) {
    return Bad("threads", std::to_string(threads), "must be 0 (auto) to 256");
  }
  if (chunk_bytes < kMinChunk || chunk_bytes > kMaxChunk) {
    return Bad("chunk_bytes", std::to_string(chunk_bytes),
               "must be 4096 bytes to 1 GiB");
  }
  if (staging_bytes < chunk_bytes) {
    return Bad("staging_bytes", std::to_string(staging_bytes),
               "must hold at least one chunk (chunk_bytes = " +
                   std::to_string(chunk_bytes) + ")");
  }
  if (staging_bytes > (size_t{64} << 30)) {
    return Bad("staging_bytes", std::to_string(staging_bytes),
               "must be at most 64 GiB");
  }
  if (queue_depth < 1 || queue_depth > 4096) {
    return Bad("queue_depth", std::to_string(queue_depth), "must be 1 to 4096");
  }
  if (copy_streams < 0 || copy_streams > 256) {
    return Bad("copy_streams", std::to_string(copy_streams),
               "must be 0 (auto) to 256");
  }
  if (!(resident_threshold >= 0.0 && resident_threshold <= 1.0)) {
    return Bad("resident_threshold", std::to_string(resident_threshold),
               "must be between 0 and 1");
  }
  // The staging slot: only CUDA loads have one (SetLoadOption's "chunk"
  // sets it on every device, so a cpu load's small chunk is no error).
  constexpr size_t kMinCudaChunk = size_t{64} << 10;
  if (device.is_cuda() && cuda_chunk_bytes != 0 &&
      (cuda_chunk_bytes < kMinCudaChunk || cuda_chunk_bytes > kMaxChunk)) {
    return Bad("cuda_chunk_bytes", std::to_string(cuda_chunk_bytes),
               "must be 0 (auto) or 64 KiB (65536 bytes) to 1 GiB for a "
               "CUDA device");
  }
  if (host_register_piece_bytes != 0 &&
      (host_register_piece_bytes < kMinChunk ||
       host_register_piece_bytes > (size_t{64} << 30))) {
    return Bad("host_register_piece_bytes",
               std::to_string(host_register_piece_bytes),
               "must be 0 (auto) or 4096 bytes to 64 GiB");
  }
  if (local_world_size < 1 || local_world_size > 1024) {
    return Bad("local_world_size", std::to_string(local_world_size),
               "must be 1 to 1024 (processes loading at once on this host)");
  }
  if (zero_copy && device.is_cuda()) {
    return Bad("zero_copy", "true",
               "views of a file mapping are host memory; it applies to "
               "device cpu only");
  }
  return Status::OK();
}

namespace {

std::string Size(size_t bytes) { return FormatByteSize(bytes); }
std::string AutoOr(size_t v, const std::string& text) {
  return v == 0 ? "auto" : text;
}

// InvalidArgument "option NAME = 'TEXT': WHY", the one wording of a value
// SetLoadOption refuses.
Status BadValue(std::string_view name, std::string_view text,
                std::string_view why) {
  return Status::InvalidArgument("option " + std::string(name) + " = '" +
                                 std::string(text) + "': " + std::string(why));
}

// Parses the whole of TEXT as a decimal T (an int in [INT_MIN, INT_MAX], a
// double); else BadValue saying EXPECTED.
template <typename T>
StatusOr<T> ParseNumber(std::string_view name, std::string_view text,
                        std::string_view expected) {
  T v{};
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return BadValue(name, text, expected);
  }
  return v;
}

StatusOr<int> ParseInt(std::string_view name, std::string_view text) {
  return ParseNumber<int>(name, text, "expected a decimal integer");
}

StatusOr<double> ParseFraction(std::string_view name, std::string_view text) {
  return ParseNumber<double>(name, text, "expected a decimal number");
}

StatusOr<size_t> ParseSizeKnob(std::string_view name, std::string_view text) {
  StatusOr<uint64_t> v = ParseByteSize(text);
  if (!v.ok()) return v.status().WithContext("option " + std::string(name));
  if (*v > SIZE_MAX) return BadValue(name, text, "too large");
  return static_cast<size_t>(*v);
}

StatusOr<bool> ParseBool(std::string_view name, std::string_view text) {
  if (text == "true" || text == "on" || text == "1") return true;
  if (text == "false" || text == "off" || text == "0") return false;
  return BadValue(name, text, "expected true or false");
}

}  // namespace

const std::vector<std::string_view>& LoadOptionNames() {
  static const std::vector<std::string_view> kNames = {"device",
                                                       "backend",
                                                       "gds",
                                                       "host_register",
                                                       "threads",
                                                       "chunk",
                                                       "cuda_chunk",
                                                       "staging",
                                                       "queue_depth",
                                                       "direct_min_bytes",
                                                       "copy_streams",
                                                       "resident_threshold",
                                                       "zero_copy",
                                                       "host_register_piece",
                                                       "host_buffer_cache",
                                                       "uring_register_min",
                                                       "local_world_size"};
  return kNames;
}

Status SetLoadOption(LoadOptions& o, std::string_view name,
                     std::string_view value) {
  if (name == "device") {
    WL_ASSIGN_OR_RETURN(o.device, Device::Parse(value));
  } else if (name == "backend") {
    WL_ASSIGN_OR_RETURN(o.backend, ParseBackend(value));
  } else if (name == "gds") {
    WL_ASSIGN_OR_RETURN(o.gds, ParseGdsMode(value));
  } else if (name == "host_register") {
    WL_ASSIGN_OR_RETURN(o.host_register, ParseHostRegisterMode(value));
  } else if (name == "threads") {
    WL_ASSIGN_OR_RETURN(o.threads, ParseInt(name, value));
  } else if (name == "chunk") {
    WL_ASSIGN_OR_RETURN(o.chunk_bytes, ParseSizeKnob(name, value));
    // One chunk for the user: a host read and, for CUDA devices, the
    // staging slot (LoadOptions keeps them apart only so that each has its
    // own tuned default).
    o.cuda_chunk_bytes = o.chunk_bytes;
  } else if (name == "cuda_chunk") {
    WL_ASSIGN_OR_RETURN(o.cuda_chunk_bytes, ParseSizeKnob(name, value));
  } else if (name == "staging") {
    WL_ASSIGN_OR_RETURN(o.staging_bytes, ParseSizeKnob(name, value));
  } else if (name == "queue_depth") {
    WL_ASSIGN_OR_RETURN(o.queue_depth, ParseInt(name, value));
  } else if (name == "direct_min_bytes") {
    WL_ASSIGN_OR_RETURN(o.direct_min_bytes, ParseSizeKnob(name, value));
  } else if (name == "copy_streams") {
    WL_ASSIGN_OR_RETURN(o.copy_streams, ParseInt(name, value));
  } else if (name == "resident_threshold") {
    WL_ASSIGN_OR_RETURN(o.resident_threshold, ParseFraction(name, value));
  } else if (name == "zero_copy") {
    WL_ASSIGN_OR_RETURN(o.zero_copy, ParseBool(name, value));
  } else if (name == "host_register_piece") {
    WL_ASSIGN_OR_RETURN(o.host_register_piece_bytes,
                        ParseSizeKnob(name, value));
  } else if (name == "host_buffer_cache") {
    WL_ASSIGN_OR_RETURN(o.host_buffer_cache_bytes, ParseSizeKnob(name, value));
  } else if (name == "uring_register_min") {
    WL_ASSIGN_OR_RETURN(o.uring_register_min_bytes, ParseSizeKnob(name, value));
  } else if (name == "local_world_size") {
    WL_ASSIGN_OR_RETURN(o.local_world_size, ParseInt(name, value));
  } else {
    std::string known;
    for (std::string_view n : LoadOptionNames()) {
      known += (known.empty() ? "" : ", ") + std::string(n);
    }
    return Status::InvalidArgument("unknown load option '" + std::string(name) +
                                   "' (known: " + known + ")");
  }
  return Status::OK();
}

std::string LoadOptions::ToString() const {
  char threshold[32];
  std::snprintf(threshold, sizeof threshold, "%.2f", resident_threshold);
  const std::string never = uring_register_min_bytes == SIZE_MAX
                                ? "never"
                                : Size(uring_register_min_bytes);
  return "backend " + std::string(BackendName(backend)) + ", gds " +
         std::string(GdsModeName(gds)) + ", host_register " +
         std::string(HostRegisterModeName(host_register)) + ", threads " +
         (threads == 0 ? std::string("auto") : std::to_string(threads)) +
         ", chunk " + Size(chunk_bytes) + ", cuda_chunk " +
         AutoOr(cuda_chunk_bytes, Size(cuda_chunk_bytes)) + ", staging " +
         Size(staging_bytes) + ", queue_depth " + std::to_string(queue_depth) +
         ", direct_min_bytes " + Size(direct_min_bytes) + ", copy_streams " +
         (copy_streams == 0 ? std::string("auto")
                            : std::to_string(copy_streams)) +
         ", resident_threshold " + threshold + ", zero_copy " +
         (zero_copy ? "true" : "false") + ", host_register_piece " +
         AutoOr(host_register_piece_bytes, Size(host_register_piece_bytes)) +
         ", host_buffer_cache " + Size(host_buffer_cache_bytes) +
         ", uring_register_min " + never + ", local_world_size " +
         std::to_string(local_world_size);
}

}  // namespace weightlift
