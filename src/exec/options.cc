// LoadOptions, Device, Backend and GdsMode: parsing, names, validation.
#include "weightlift/options.h"

#include <charconv>
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
  if (cuda_chunk_bytes != 0 &&
      (cuda_chunk_bytes < kMinChunk || cuda_chunk_bytes > kMaxChunk)) {
    return Bad("cuda_chunk_bytes", std::to_string(cuda_chunk_bytes),
               "must be 0 (auto) or 4096 bytes to 1 GiB");
  }
  if (host_register_piece_bytes != 0 && host_register_piece_bytes < kMinChunk) {
    return Bad("host_register_piece_bytes",
               std::to_string(host_register_piece_bytes),
               "must be 0 (auto) or at least 4096 bytes");
  }
  if (zero_copy && device.is_cuda()) {
    return Bad("zero_copy", "true",
               "views of a file mapping are host memory; it applies to "
               "device cpu only");
  }
  return Status::OK();
}

}  // namespace weightlift
