#include "exec/read_counts.h"

#include <algorithm>
#include <cstdio>

namespace weightlift::internal {
namespace {

std::string Plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string SlicesNote(const ReadCounts& c) {
  std::string s =
      "slices: " + Plural(c.slices, "sliced tensor", "sliced tensors") + " (" +
      std::to_string(c.contiguous_slices) + " contiguous, " +
      std::to_string(c.row_run_slices) + " as row runs in " +
      std::to_string(c.row_run_reads) + " reads, " +
      std::to_string(c.strided_slices) + " strided over " +
      std::to_string(c.strided_rows) + " rows); read " +
      std::to_string(c.slice_bytes_read) + " bytes for " +
      std::to_string(c.slice_bytes_selected) + " selected";
  if (c.slice_bytes_selected > 0) {
    const double over = 100.0 *
                        (static_cast<double>(c.slice_bytes_read) -
                         static_cast<double>(c.slice_bytes_selected)) /
                        static_cast<double>(c.slice_bytes_selected);
    char buf[32];
    std::snprintf(buf, sizeof buf, " (overhead %.1f%%)", over);
    s += buf;
  }
  if (c.slice_read_cost_bytes > 0) {
    s += "; a read weighed as " +
         std::to_string(c.slice_read_cost_bytes >> 10) +
         " KiB more (O_DIRECT, object storage or a file not in the page "
         "cache: requests cost more than their bytes)";
  }
  return s;
}

}  // namespace

std::vector<std::string> CountedNotes(const LoadReport& r) {
  std::vector<std::string> notes;
  for (const FileReport& f : r.files) {
    if (f.copied_row_runs > 0) {
      notes.push_back(
          f.path + ": " + Plural(f.copied_row_runs, "row run", "row runs") +
          " in " + Plural(f.copied_row_reads, "strided read", "strided reads") +
          " copied from a mapping of the page cache");
    }
  }
  const ReadCounts& c = r.counts;
  if (c.registered_buffer_reads > 0) {
    notes.push_back(std::to_string(c.registered_buffer_reads) +
                    " io_uring reads into registered buffers");
  }
  if (c.slices > 0) notes.push_back(SlicesNote(c));
  if (c.bounced_reads > 0 && c.direct_reads == 0 && r.bytes > 0) {
    notes.push_back(
        "all reads went through the bounce buffer and were "
        "copied (" +
        Plural(c.bounced_reads, "chunk)", "chunks)"));
  } else if (c.bounced_reads > 0) {
    // Says where the bytes landed, not which system call read them (either
    // kind may be O_DIRECT or buffered).
    notes.push_back(Plural(c.direct_reads, "read", "reads") +
                    " landed straight in the destination, " +
                    std::to_string(c.bounced_reads) +
                    " went through the bounce buffer and " +
                    (c.bounced_reads == 1 ? "was" : "were") + " copied");
  }
  return notes;
}

void AppendCountedNotes(LoadReport* r) {
  for (std::string& n : CountedNotes(*r)) r->notes.push_back(std::move(n));
}

std::vector<std::string> UncountedNotes(const LoadReport& r) {
  const std::vector<std::string> counted = CountedNotes(r);
  std::vector<std::string> out;
  for (const std::string& n : r.notes) {
    if (std::find(counted.begin(), counted.end(), n) == counted.end()) {
      out.push_back(n);
    }
  }
  return out;
}

void AddCounts(const ReadCounts& part, ReadCounts* into) {
  for (const auto& [name, member] : ReadCounts::Fields()) {
    // A weight, not a tally: the largest any part used.
    into->*member = member == &ReadCounts::slice_read_cost_bytes
                        ? std::max(into->*member, part.*member)
                        : into->*member + part.*member;
  }
}

}  // namespace weightlift::internal
