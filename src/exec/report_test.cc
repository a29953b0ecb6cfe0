#include "weightlift/report.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace weightlift
