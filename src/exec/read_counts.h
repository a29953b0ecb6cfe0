// The notes a LoadReport's counts say in words (ReadCounts, and each
// FileReport's rows copied from a mapping), made in one place so that a
// load made of several (a group load's batches) can add the counts up and
// say each such note once, instead of once per part.
#pragma once

#include <string>
#include <vector>

#include "weightlift/report.h"

namespace weightlift::internal {

// R's counted notes, in the order a load gives them: each file's copied
// row runs, io_uring reads into registered buffers, the slices' placement,
// where host reads landed. None for counts that are zero.
std::vector<std::string> CountedNotes(const LoadReport& r);

// Appends CountedNotes(*R) to R->notes; loaders call it once, at the end.
void AppendCountedNotes(LoadReport* r);

// R's notes but those CountedNotes(R) says: for a report whose counts
// are added to others' and said once for the whole.
std::vector<std::string> UncountedNotes(const LoadReport& r);

// Adds PART's counts to INTO's (slice_read_cost_bytes: the larger).
void AddCounts(const ReadCounts& part, ReadCounts* into);

}  // namespace weightlift::internal
