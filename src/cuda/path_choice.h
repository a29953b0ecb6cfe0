// Which of the three transfer paths (sinks) serves each file of a load, and
// why.
//
// GDS first, only where the driver has a real direct path (nvidia-fs loaded)
// and, in auto mode, only for files not resident in the page cache; then
// host-register or pinned staging (auto prefers staging, see path_choice.cc).
// Every file gets a FileReport with path_taken and the reasons for the paths
// not taken; a fallback from a GDS that refused the file is also a note. A
// path the user asked for by name that cannot serve a file is Unsupported.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cuda/gds_path.h"
#include "cuda/host_register_sink.h"
#include "cuda/registered_pages.h"
#include "env/file.h"
#include "exec/open_files.h"
#include "weightlift/checkpoint.h"
#include "weightlift/options.h"
#include "weightlift/report.h"

namespace weightlift::internal {

enum class TransferPath { kStaging, kHostRegister, kGds };

// One file's decision, with what its path needs. Move-only (owns the
// mapping and the GDS registration).
struct FileChoice {
  bool needed = false;
  TransferPath path = TransferPath::kStaging;
  File* file = nullptr;  // staging reads (owned by the OpenedFile)
  Mapping mapping;       // host-register (the whole file)
  // Staging, with the selections that lie in pages prepare registered
  // ahead copied straight from this mapping of them (registered_pages.h;
  // owned there; cuda_loader.cc decides per selection).
  const Mapping* ahead = nullptr;
  GdsFile gds;            // gds
  int report_index = -1;  // into LoadReport::files; -1 when not needed
};

// Chooses a path for every file with NEEDED[i] and an open OPENED[i].file,
// appending one FileReport per such file (bytes = 0) and any notes to
// REPORT. On error REPORT may hold the files chosen so far. AHEAD (may be
// null): the pages prepare registered for this load, stopped; a file with
// registered pages is staged, its selections in them copied straight out
// of them (unless host_register=off or GDS was chosen; host_register=on
// then registers nothing more on the load's clock).
StatusOr<std::vector<FileChoice>> ChoosePaths(
    const Checkpoint& ckpt, const LoadOptions& options,
    const std::vector<bool>& needed, const std::vector<OpenedFile>& opened,
    const HostRegisterSupport& host_register, const RegisteredPages* ahead,
    LoadReport* report);

}  // namespace weightlift::internal
