// Row runs copied out of a mapping of the page cache instead of one read
// each.
//
// A tensor split on its last dimension (a row-parallel weight under tensor
// parallelism, a column slice) is one short run per row: 4096 runs of 1-11
// KB for a Llama-2-7B o_proj / down_proj part. Read one pread each, those
// runs cost a system call and a page-cache lookup per row (about 3 us per
// run on the H200 with 16 threads, 262144 runs per rank at n = 8). When the
// file is resident, mapping the chunk's covering range, populating its page
// tables in one madvise(MADV_POPULATE_READ) and copying each run with
// memcpy costs a fraction of that.
//
// The cost moves from per run to per covering page, so it pays only where
// the runs are dense: rows at most kMappedRowsMaxPitch apart. Measured on
// the H200 (bench/results/2026-12-03-h200-session6/callC/
// tp6_rows_probe.log, 16 threads, thread time per run): 1 KB runs 8 KiB
// apart 2.4 us (pread 4.8), 2.75 KB runs 21.5 KiB apart 4.1 us (9.4),
// 7 KB runs 56 KiB apart 11.2 us (16.1). In a load, the TP rank's
// transfer at n = 8 fell from 75 to 45 ms (callB/tp6_phases.log).
//
// Truncation: populating a range past the end of the file fails cleanly
// (EFAULT), which is reported as an IoError naming the file and range, not
// a SIGBUS. What remains: a file truncated between a chunk's populate and
// the end of its copies (microseconds per chunk) still raises SIGBUS, as for
// the mmap backend (mmap_file.cc); pread-backed row reads (backend=pread)
// have no such window.
#pragma once

#include <cstdint>
#include <memory>

#include "env/file.h"

namespace weightlift::internal {

// Rows further apart than this are read one ReadAt each: populating the
// pages between them would cost more than the system calls it saves.
inline constexpr uint64_t kMappedRowsMaxPitch = 64u << 10;

// BASE, whose ReadRows copies runs at most kMappedRowsMaxPitch apart out of
// a shared read-only mapping of each call's covering range (BASE's Map),
// populated first; everything else is BASE's. Falls back to BASE's
// ReadRows (one ReadAt per run) when BASE cannot be mapped or the kernel
// refuses MADV_POPULATE_READ (before 5.14: EINVAL; then for the File's
// whole life, and Degraded() says so). Degraded() also counts the runs it
// copied. Meant for files resident in the page cache: populating pages that
// are not reads them in whole, between the runs too.
std::unique_ptr<File> WithRowsFromMapping(std::unique_ptr<File> base);

// Runs further apart than this leave whole pages untouched between them:
// PopulateRuns then populates each run's own pages (one madvise per run)
// rather than the covering range, since populating and later unmapping a
// page costs more than a system call (H200 probe: about 150 + 270 ns per
// page; a Llama-2-7B down_proj part at n = 8 touches 1.7 of every 5.4
// pages).
inline constexpr uint64_t kSparseRunGapBytes = 3 * 4096;

// What WithRowsFromMapping and the mmap backend share.
// Populates the page tables of the runs (ROWS of WIDTH bytes, PITCH apart,
// the first at file offset OFFSET) in MAP, a mapping whose data() is file
// offset MAP_OFFSET (Mapping::PopulateRead): the covering range in one
// call, or each run's pages when PITCH - WIDTH >= kSparseRunGapBytes. 0 or
// the first errno.
int PopulateRuns(const Mapping& map, uint64_t map_offset, uint64_t offset,
                 uint64_t pitch, uint64_t width, uint64_t rows);
// Copies ROWS runs of WIDTH bytes, PITCH apart, from SRC into DST back to
// back.
void CopyRows(const std::byte* src, uint64_t pitch, uint64_t width,
              uint64_t rows, std::byte* dst);
// The IoError for a populate that found pages past the end of PATH.
Status ShrankUnderMapping(const std::string& path, uint64_t offset,
                          uint64_t length);

}  // namespace weightlift::internal
