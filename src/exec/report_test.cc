#include "weightlift/report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "exec/read_counts.h"

namespace weightlift {
namespace {

TEST(LoadReportTest, StringAndJson) {
  LoadReport r;
  r.tensors = 2;
  r.bytes = 3000000000;
  r.seconds = 1.5;
  r.files.push_back(
      {"a \"quoted\".safetensors", "uring", "pages 3% resident", 7});
  r.notes.push_back("fell back");
  EXPECT_DOUBLE_EQ(r.gb_per_s(), 2.0);
  const std::string s = r.ToString();
  EXPECT_NE(s.find("2.00 GB/s"), std::string::npos) << s;
  EXPECT_NE(s.find("uring"), std::string::npos);
  EXPECT_NE(s.find("fell back"), std::string::npos);
  const std::string j = r.ToJson();
  EXPECT_NE(j.find("\"bytes\":3000000000"), std::string::npos) << j;
  EXPECT_NE(j.find("\\\"quoted\\\""), std::string::npos) << j;
}

TEST(LoadReportTest, StatesTheOptionsInEffectWhenRecorded) {
  LoadReport r;
  EXPECT_EQ(r.ToString().find("options:"), std::string::npos);
  EXPECT_NE(r.ToJson().find("\"options\":null"), std::string::npos);
  LoadOptions o;
  o.backend = Backend::kDirect;
  o.chunk_bytes = 1u << 20;
  o.threads = 3;
  r.options = o;
  const std::string s = r.ToString();
  EXPECT_NE(s.find("  options: backend direct, "), std::string::npos) << s;
  EXPECT_NE(s.find("threads 3, chunk 1.00 MiB"), std::string::npos) << s;
  const std::string j = r.ToJson();
  EXPECT_NE(j.find("\"backend\":\"direct\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"chunk\":1048576"), std::string::npos) << j;
  EXPECT_NE(j.find("\"uring_register_min\":268435456"), std::string::npos) << j;
}

// The counted notes say the counts in words, in one order, each only when
// its count is not zero; two reports' counts add up and are said once.
TEST(ReadCountsTest, NotesSayTheCountsAndAddUp) {
  LoadReport a;
  a.bytes = 100;
  EXPECT_TRUE(internal::CountedNotes(a).empty());
  a.files.push_back({"/m/a.safetensors", "pread", "resident", 100, 4096, 3});
  a.files.push_back({"/m/b.safetensors", "pread", "resident", 0, 0, 0});
  a.counts.bounced_reads = 1;
  a.counts.slices = 2;
  a.counts.contiguous_slices = 1;
  a.counts.row_run_slices = 1;
  a.counts.row_run_reads = 4096;
  a.counts.slice_bytes_selected = 1000;
  a.counts.slice_bytes_read = 1500;
  const std::vector<std::string> want = {
      "/m/a.safetensors: 4096 row runs in 3 strided reads copied from a "
      "mapping of the page cache",
      "slices: 2 sliced tensors (1 contiguous, 1 as row runs in 4096 reads, 0 "
      "strided over 0 rows); read 1500 bytes for 1000 selected (overhead "
      "50.0%)",
      "all reads went through the bounce buffer and were copied (1 chunk)"};
  EXPECT_EQ(internal::CountedNotes(a), want);

  LoadReport b;
  b.counts.direct_reads = 1;
  b.counts.bounced_reads = 2;
  b.counts.registered_buffer_reads = 7;
  b.counts.slice_read_cost_bytes = 32 << 10;
  internal::AddCounts(b.counts, &a.counts);
  const std::vector<std::string> sum = internal::CountedNotes(a);
  ASSERT_EQ(sum.size(), 4u);
  EXPECT_EQ(sum[1], "7 io_uring reads into registered buffers");
  EXPECT_NE(sum[2].find("a read weighed as 32 KiB more"), std::string::npos)
      << sum[2];
  EXPECT_EQ(sum[3],
            "1 read landed straight in the destination, 3 went through the "
            "bounce buffer and were copied");
  // The largest weight, not a sum.
  internal::AddCounts(b.counts, &a.counts);
  EXPECT_EQ(a.counts.slice_read_cost_bytes, 32u << 10);
  EXPECT_EQ(a.counts.bounced_reads, 5u);

  // Leaving them out leaves the other notes, in their order.
  a.notes = {"first"};
  internal::AppendCountedNotes(&a);
  a.notes.push_back("last");
  EXPECT_EQ(a.notes.size(), 6u);
  EXPECT_EQ(internal::UncountedNotes(a),
            (std::vector<std::string>{"first", "last"}));

  // The counts by name, in the JSON report.
  const std::string j = a.ToJson();
  EXPECT_NE(j.find("\"bounced_reads\":5"), std::string::npos) << j;
  EXPECT_NE(j.find("\"copied_row_runs\":4096"), std::string::npos) << j;
  EXPECT_EQ(ReadCounts::Fields().size(), 12u);
}

}  // namespace
}  // namespace weightlift
