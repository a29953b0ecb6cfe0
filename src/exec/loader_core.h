// The one Loader: Load, LoadSlices and LoadInto for every device, written
// once over a LoadTarget (load_target.h).
//
//   resolve the request (request.h) -> open the files once (open_files.h)
//   -> allocate (target) -> route each file to a sink (target) -> place
//   the selections and plan each route (plan/) -> run the executor
//   (executor.h) per route with one CompletionTracker -> check the files
//   did not change -> the result and its LoadReport.
//
// Loads of one loader are serialized (its staging memory and pool are
// reused); the report of a failed load is not returned, and nothing of it
// is reported as loaded.
#pragma once

#include <memory>

#include "exec/load_target.h"
#include "exec/open_files.h"
#include "weightlift/loader.h"

namespace weightlift::internal {

// A Loader for OPTIONS over TARGET. WRAP (tests only) sees every File a
// load opens. SETUP_SECONDS: the target's creation, paid by the first
// load's report (LoadReport::setup_seconds).
std::unique_ptr<Loader> MakeLoader(const LoadOptions& options,
                                   std::unique_ptr<LoadTarget> target,
                                   FileWrapper wrap, double setup_seconds);

}  // namespace weightlift::internal
