// Row runs copied out of one mapping of the page cache instead of one read
// each.
//
// A tensor split on its last dimension (a row-parallel weight under tensor
// parallelism, a column slice) is one short run per row: 4096 runs of 1-11
// KB for a Llama-2-7B o_proj / down_proj part. Read one pread each, those
// runs cost a system call and a page-cache lookup per row, and threads
// sharing one descriptor contend on it (its reference count and read-ahead
// state). Copying each run out of a mapping of the file costs a memcpy and,
// for the first run on a page, a page fault that maps the neighbouring
// resident pages too (fault-around), with no system call at all.
//
// The file is mapped once, whole, when the first row runs are asked for,
// and stays mapped for the File's life: mapping and unmapping each call's
// covering range cost a write lock of the address space and TLB shootdowns
// across the load's threads, and populating it first (MADV_POPULATE_READ,
// one call per run where rows are sparse) cost more than the faults it
// saved. Measured on the H200 (bench/results/2026-12-03-h200-session8/
// rows_probe2.log, a Llama-2-7B rank's 262144 row runs at n = 8, 16
// threads): one whole-file mapping, faults only 14.8-17.3 ms; a mapping per
// call with populate (this file's previous method) 42.4-44.6 ms; one pread
// per run 52.8-53.9 ms (26.2 ms with a descriptor per thread); io_uring
// with a descriptor per thread 22.4-25.7 ms. Unmapping the whole file
// afterwards took 0.7 ms.
//
// Truncation: every call checks the file's size (fstat) before it copies,
// so a file that shrank since it was opened is an IoError naming the file
// and range, not a SIGBUS. What remains: a file truncated during one call's
// copies (at most a few milliseconds) still raises SIGBUS, as for the mmap
// backend (mmap_file.cc); pread-backed row reads (backend=pread) have no
// such window.
#pragma once

#include <cstdint>
#include <memory>

#include "env/file.h"
#include "env/mapping.h"

namespace weightlift::internal {

// Rows further apart than this are read one ReadAt each: each run would
// take a page fault of its own.
inline constexpr uint64_t kMappedRowsMaxPitch = 64u << 10;

// BASE, whose ReadRows copies runs at most kMappedRowsMaxPitch apart out of
// one shared read-only mapping of the whole file (BASE's Map, made at the
// first such call); everything else is BASE's. Falls back to BASE's
// ReadRows (one ReadAt per run) when BASE cannot be mapped (then for the
// File's whole life, and Degraded() says so). Degraded() also counts the
// runs it copied. Meant for files resident in the page cache: a fault on a
// page that is not reads it in first. MADE, when not empty, is that
// mapping made already (and perhaps filled: warm_mappings.h); it must map
// the whole of the file BASE reads (else it is dropped and one is made).
std::unique_ptr<File> WithRowsFromMapping(std::unique_ptr<File> base,
                                          Mapping made = {});

// Runs further apart than this leave whole pages untouched between them:
// PopulateRuns then populates each run's own pages (one madvise per run)
// rather than the covering range (H200 probe, session 6: about 150 ns to
// populate and 270 ns to unmap a page of a mapping made per call; a
// Llama-2-7B down_proj part at n = 8 touches 1.7 of every 5.4 pages).
inline constexpr uint64_t kSparseRunGapBytes = 3 * 4096;

// For copies that must find a truncated file before they touch it, not in
// a SIGBUS (the Python package's large slice copies, host_reads.cc).
// Populates the page tables of the runs (ROWS of WIDTH bytes, PITCH apart,
// the first at file offset OFFSET) in MAP, a mapping whose data() is file
// offset MAP_OFFSET (Mapping::PopulateRead): the covering range in one
// call, or each run's pages when PITCH - WIDTH >= kSparseRunGapBytes. 0 or
// the first errno (EFAULT: pages past the end of the file).
int PopulateRuns(const Mapping& map, uint64_t map_offset, uint64_t offset,
                 uint64_t pitch, uint64_t width, uint64_t rows);
// Copies ROWS runs of WIDTH bytes, PITCH apart, from SRC into DST back to
// back.
void CopyRows(const std::byte* src, uint64_t pitch, uint64_t width,
              uint64_t rows, std::byte* dst);
// The IoError for row runs at [OFFSET, OFFSET + LENGTH) of PATH that lie
// past its end now: it shrank since it was opened (a populate of them
// failed with EFAULT, or its size says so).
Status ShrankUnderMapping(const std::string& path, uint64_t offset,
                          uint64_t length);

}  // namespace weightlift::internal
