// A file read through the page cache while its pages are not there.
//
// Buffered reads are memory copies when the pages are resident, so the
// slice planner weighs them by their bytes alone (File::read_cost_bytes 0)
// and reads a slice's short row runs one pread each. When the pages are not
// resident every one of those preads is a request to storage. A cold file
// read with pread therefore weighs a read as O_DIRECT does
// (kDirectReadCostBytes): the planner reads row runs that lie close together
// covering, and places them strided. On the 2-core development VM, rank 0
// of 8 of TinyLlama-1.1B from an evicted file with backend=pread took
// 0.85-1.11 s this way against 1.71-1.96 s with one pread per row run (90112
// of them; session 12, bench/results/2026-12-04-devbox-cold-pread/).
#pragma once

#include <memory>

#include "env/file.h"

namespace weightlift::internal {

// BASE, with read_cost_bytes() kDirectReadCostBytes; everything else is
// BASE's. For a buffered (pread) File whose pages were sampled as mostly
// not resident.
std::unique_ptr<File> WithColdReads(std::unique_ptr<File> base);

}  // namespace weightlift::internal
