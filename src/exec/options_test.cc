#include "weightlift/options.h"

#include <gtest/gtest.h>

#include "weightlift/loader.h"
#include "weightlift/report.h"

namespace weightlift {
namespace {

TEST(DeviceTest, ParseAndPrint) {
  EXPECT_EQ(*Device::Parse("cpu"), Device::Cpu());
  EXPECT_EQ(*Device::Parse("cuda"), Device::Cuda(0));
  EXPECT_EQ(*Device::Parse("cuda:3"), Device::Cuda(3));
  EXPECT_EQ(Device::Cuda(3).ToString(), "cuda:3");
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:+1", "cuda:1x",
                          "CPU", "cuda:99999999999"}) {
    EXPECT_EQ(Device::Parse(bad).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(BackendTest, NamesRoundTrip) {
  for (Backend b : {Backend::kAuto, Backend::kPread, Backend::kDirect,
                    Backend::kUring, Backend::kMmap}) {
    EXPECT_EQ(*ParseBackend(BackendName(b)), b);
  }
  EXPECT_FALSE(ParseBackend("fast").ok());
  for (GdsMode m : {GdsMode::kAuto, GdsMode::kOn, GdsMode::kOff}) {
    EXPECT_EQ(*ParseGdsMode(GdsModeName(m)), m);
  }
  EXPECT_FALSE(ParseGdsMode("yes").ok());
}

TEST(LoadOptionsTest, Validate) {
  EXPECT_TRUE(LoadOptions{}.Validate().ok());
  auto bad = [](auto mutate, const char* knob) {
    LoadOptions o;
    mutate(o);
    Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << knob;
    EXPECT_NE(s.message().find(knob), std::string::npos) << s.ToString();
  };
  bad([](LoadOptions& o) { o.threads = -1; }, "threads");
  bad([](LoadOptions& o) { o.chunk_bytes = 1000; }, "chunk_bytes");
  bad([](LoadOptions& o) { o.staging_bytes = 4096; }, "staging_bytes");
  bad([](LoadOptions& o) { o.queue_depth = 0; }, "queue_depth");
  bad([](LoadOptions& o) { o.resident_threshold = 1.5; }, "resident_threshold");
  bad([](LoadOptions& o) { o.copy_streams = -2; }, "copy_streams");
  bad([](LoadOptions& o) { o.device = Device::Cuda(-1); }, "device");
}

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

}  // namespace
}  // namespace weightlift
