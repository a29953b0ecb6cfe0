#include "synth_cache.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "cli_util.h"
#include "format/synth.h"

namespace weightlift::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kMarker[] = ".weightlift-synth";

std::string MarkerText(const std::string& layout, int shards, uint64_t seed) {
  return "layout=" + layout + "\nshards=" + std::to_string(shards) +
         "\nseed=" + std::to_string(seed) + "\n";
}

// True for the names Synthesize writes (and its temporaries).
bool IsSynthName(const std::string& name) {
  if (name == kMarker || name == "model.safetensors" ||
      name == "model.safetensors.index.json") {
    return true;
  }
  auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() &&
           name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name.rfind("model", 0) == 0 &&
      (ends_with(".safetensors") || ends_with(".tmp") ||
       ends_with(".index.json"))) {
    return true;
  }
  return false;
}

}  // namespace

int PublishedShards(const std::string& layout) {
  if (layout == "llama2-7b") return 2;
  if (layout == "llama2-13b") return 3;
  if (layout == "llama3-8b") return 4;
  return 1;
}

std::string LayoutNames() {
  std::string out;
  for (const internal::LayoutSummary& l : internal::ListLayouts()) {
    if (!out.empty()) out += ", ";
    out += l.name;
  }
  return out;
}

Status SynthesizeChecked(const std::string& layout, int shards,
                         const std::string& dir, uint64_t seed) {
  WL_ASSIGN_OR_RETURN(std::vector<internal::SynthTensor> tensors,
                      internal::LayoutTensors(layout));
  uint64_t need = 0;
  for (const internal::SynthTensor& t : tensors) need += t.bytes;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::IoError(dir + ": cannot create directory: " + ec.message());
  }
  struct statvfs sv;
  if (::statvfs(dir.c_str(), &sv) == 0) {
    const uint64_t free_bytes =
        static_cast<uint64_t>(sv.f_bavail) * static_cast<uint64_t>(sv.f_frsize);
    // Existing files of a previous generation are overwritten.
    uint64_t existing = 0;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file(ec)) existing += e.file_size(ec);
    }
    if (free_bytes + existing < need + (need >> 6)) {
      return Status::ResourceExhausted(
          dir + ": layout " + layout + " needs " + FormatBytes(need) +
          " but the file system has " + FormatBytes(free_bytes) + " free");
    }
  }
  WL_RETURN_IF_ERROR(internal::Synthesize(layout, shards, dir, seed));
  return Status::OK();
}

StatusOr<std::string> DefaultCacheDir(const std::string& layout) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/weightlift/synth/" + layout;
  }
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] == '\0') {
    return Status::InvalidArgument(
        "neither XDG_CACHE_HOME nor HOME is set; pass --cache DIR");
  }
  return std::string(home) + "/.cache/weightlift/synth/" + layout;
}

bool SynthCached(const std::string& layout, int shards, uint64_t seed,
                 const std::string& dir) {
  std::ifstream in(dir + "/" + kMarker);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str() == MarkerText(layout, shards, seed);
}

Status EnsureSynthCached(const std::string& layout, int shards, uint64_t seed,
                         const std::string& dir, bool* generated) {
  *generated = false;
  const std::string marker = dir + "/" + kMarker;
  if (SynthCached(layout, shards, seed, dir)) return Status::OK();
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return Status::InvalidArgument(dir + ": exists and is not a directory");
    }
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!IsSynthName(name)) {
        return Status::InvalidArgument(
            dir + ": not a weightlift synth cache (holds '" + name +
            "'); refusing to write there. Pass --cache with an empty or new "
            "folder");
      }
    }
    // A different or unfinished generation: start clean.
    fs::remove(marker, ec);
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      fs::remove(e.path(), ec);
    }
  }
  WL_RETURN_IF_ERROR(SynthesizeChecked(layout, shards, dir, seed));
  // The marker goes last: its presence means the files are complete.
  const std::string tmp = marker + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << MarkerText(layout, shards, seed);
    out.flush();
    if (!out) return Status::IoError(tmp + ": cannot write");
  }
  if (std::rename(tmp.c_str(), marker.c_str()) != 0) {
    return Status::IoErrorFromErrno(tmp + ": rename to " + marker, errno);
  }
  *generated = true;
  return Status::OK();
}

}  // namespace weightlift::cli
