#include "cuda/path_choice.h"

#include <cstdio>
#include <string>
#include <utility>

#include "cuda/cufile_lib.h"
#include "env/page_cache.h"
#include "util/percent.h"

namespace weightlift::internal {
namespace {

// auto serves page-cache-resident files through pinned staging, not
// host-register (bench/gpu_run.sh prints the comparison). H200 sweep (13.5 GB
// Llama-2-7B on tmpfs): staging 51.0 GB/s (4 MiB x 16 threads x 2 slots),
// host-register at most 13.5 GB/s (64-256 MiB pieces, 8-16 threads):
// registration, not the copy, is the limit there.
constexpr const char* kAutoChoiceWhy =
    "auto prefers pinned staging for resident files (H200: 51 GB/s vs 13.5 "
    "GB/s for host-register)";

}  // namespace

StatusOr<std::vector<FileChoice>> ChoosePaths(
    const Checkpoint& ckpt, const LoadOptions& options,
    const std::vector<bool>& needed, const std::vector<OpenedFile>& opened,
    const HostRegisterSupport& host_register, const RegisteredPages* ahead,
    LoadReport* report) {
  std::vector<std::string>& notes = report->notes;
  std::vector<FileChoice> files(ckpt.files().size());
  bool nvfs = NvidiaFsLoaded();
  for (size_t i = 0; i < files.size(); ++i) {
    if (!needed[i] || !opened[i].file) continue;
    const FileInfo& fi = ckpt.files()[i];
    FileChoice& fp = files[i];
    fp.needed = true;
    fp.file = opened[i].file.get();
    FileReport fr = opened[i].report;
    if (fr.path.empty()) fr.path = fi.path;
    bool ramfs = OnMemoryFileSystem(*fp.file);
    double frac = opened[i].resident_fraction;
    const bool small = opened[i].small_read;  // sampling would cost more
    if (frac < 0 && !ramfs && !small) {       // backend named explicitly
      if (auto r = SampleResidency(*fp.file); r.ok()) frac = r->fraction;
    }
    bool resident = ramfs || frac >= options.resident_threshold;
    std::string residency =
        ramfs      ? "file on tmpfs/ramfs (always resident)"
        : small    ? "a small read, residency not sampled"
        : frac < 0 ? "residency not sampled"
                   : "pages " + Percent(frac) + " resident (sampled)";

    // GDS first: only where the driver has a real direct path.
    std::string gds_why;
    bool try_gds = false;
    const bool compat = options.gds == GdsMode::kCompat;
    if (options.gds == GdsMode::kOff) {
      gds_why = "gds=off";
    } else if (compat) {
      try_gds = true;  // every file, resident or not, nvidia-fs or not
    } else if (!nvfs) {
      gds_why =
          "GDS unavailable: nvidia-fs not loaded (/proc/driver/nvidia-fs "
          "absent), so cuFile has no direct path";
      if (options.gds == GdsMode::kOn) {
        return Status::Unsupported("gds=on but GDS cannot serve " + fi.path +
                                   ": nvidia-fs kernel module not loaded "
                                   "(/proc/driver/nvidia-fs absent); cuFile "
                                   "would only run in compatibility mode");
      }
    } else if (options.gds == GdsMode::kAuto && small) {
      gds_why = "GDS not used: " + residency + ", read buffered";
    } else if (options.gds == GdsMode::kAuto && resident) {
      gds_why = "GDS not used: " + residency + ", the page cache is faster";
    } else {
      try_gds = true;
    }
    if (try_gds) {
      auto gds = GdsFile::Open(*fp.file, compat);
      if (gds.ok()) {
        fp.gds = std::move(gds).value();
        fp.path = TransferPath::kGds;
        if (compat) {
          fr.path_taken = "gds-compat";
          fr.reason =
              "gds=compat: cuFile forced into its compatibility mode "
              "(POSIX reads through cuFile's bounce buffers, not GPUDirect; "
              "configuration " +
              fp.gds.lib()->config_path() + ")";
        } else {
          fr.path_taken = "gds";
          fr.reason =
              "nvidia-fs loaded; cuFileHandleRegister accepted the file";
        }
      } else if (options.gds == GdsMode::kOn || compat) {
        return Status::Unsupported(
            "gds=" + std::string(GdsModeName(options.gds)) + ": " +
            gds.status().message());
      } else {
        gds_why = "GDS refused: " + gds.status().message();
        notes.push_back(fi.path + ": " + gds_why + "; fell back");
      }
    }
    if (fp.path != TransferPath::kGds) {
      // HR_WHY: why host-register was (not) taken, without the residency
      // (the open reason already states it for the staging path).
      bool hr = false;
      std::string hr_why;
      // What prepare registered of this file, unless this load turns it
      // down (host_register=off); SHORTFALL: why some of it was not.
      const uint32_t file = static_cast<uint32_t>(i);
      const bool use_ahead =
          ahead != nullptr && options.host_register != HostRegisterMode::kOff;
      const std::string shortfall = use_ahead ? ahead->Shortfall(file) : "";
      if (use_ahead) fp.ahead = ahead->FileMapping(file);
      if (fp.ahead != nullptr) {
        char buf[200];
        std::snprintf(
            buf, sizeof buf,
            "%.2f GB of its pages registered by prepare ahead of the load: "
            "the selections in them copied straight from the page cache",
            static_cast<double>(ahead->registered_file_bytes(file)) / 1e9);
        hr_why = buf;
        if (!shortfall.empty()) hr_why += " (" + shortfall + ")";
      } else if (!shortfall.empty()) {
        // Prepare meant to register some of its pages, and none was.
        hr_why = shortfall;
      } else if (options.host_register == HostRegisterMode::kOn) {
        hr = true;
        hr_why = "host_register=on";
      } else if (options.host_register == HostRegisterMode::kOff) {
        hr_why = "host_register=off";
      } else if (small) {
        hr_why = "a small read, so not host-register";
      } else if (!resident) {
        hr_why = "not resident, so not host-register";
      } else if (!host_register.ok) {
        hr_why = "host-register unavailable: " + host_register.why;
      } else {
        hr_why = kAutoChoiceWhy;
      }
      if (hr) {
        WL_ASSIGN_OR_RETURN(fp.mapping, fp.file->Map(0, fp.file->size(),
                                                     MapAccess::kReadShared));
        fp.path = TransferPath::kHostRegister;
        fr.path_taken = "host-register";
        fr.reason = residency + "; " + hr_why + "; " + gds_why;
      } else {
        fp.path = TransferPath::kStaging;
        fr.path_taken =
            "pinned-staging+" + std::string(fp.file->backend_name());
        std::string io_why = opened[i].report.reason.empty()
                                 ? residency
                                 : opened[i].report.reason;
        if (ramfs) io_why = residency + "; " + io_why;
        fr.reason = io_why + "; " + hr_why + "; " + gds_why;
      }
    }
    fr.bytes = 0;
    fp.report_index = static_cast<int>(report->files.size());
    report->files.push_back(std::move(fr));
  }
  return files;
}

}  // namespace weightlift::internal
