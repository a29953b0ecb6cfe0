#include "weightlift/options.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <utility>

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
  bad([](LoadOptions& o) { o.local_world_size = 0; }, "local_world_size");
  bad([](LoadOptions& o) { o.local_world_size = 1025; }, "local_world_size");
  bad([](LoadOptions& o) { o.chunk_bytes = 1000; }, "chunk_bytes");
  bad([](LoadOptions& o) { o.staging_bytes = 4096; }, "staging_bytes");
  bad([](LoadOptions& o) { o.queue_depth = 0; }, "queue_depth");
  bad([](LoadOptions& o) { o.resident_threshold = 1.5; }, "resident_threshold");
  bad([](LoadOptions& o) { o.copy_streams = -2; }, "copy_streams");
  bad([](LoadOptions& o) { o.device = Device::Cuda(-1); }, "device");
  bad([](LoadOptions& o) { o.host_register_piece_bytes = 100; },
      "host_register_piece_bytes");
  bad(
      [](LoadOptions& o) {
        o.device = Device::Cuda(0);
        o.cuda_chunk_bytes = 32u << 10;
      },
      "cuda_chunk_bytes");
  bad(
      [](LoadOptions& o) {
        o.device = Device::Cuda(0);
        o.zero_copy = true;
      },
      "zero_copy");
  // The staging slot is a CUDA knob: a cpu load's small chunk, which
  // SetLoadOption's "chunk" also copies there, is no error.
  LoadOptions cpu;
  cpu.cuda_chunk_bytes = 4096;
  EXPECT_TRUE(cpu.Validate().ok());
}

TEST(HostRegisterModeTest, NamesRoundTrip) {
  for (HostRegisterMode m : {HostRegisterMode::kAuto, HostRegisterMode::kOn,
                             HostRegisterMode::kOff}) {
    EXPECT_EQ(*ParseHostRegisterMode(HostRegisterModeName(m)), m);
  }
  EXPECT_FALSE(ParseHostRegisterMode("yes").ok());
}

TEST(SetLoadOptionTest, EveryKnobByName) {
  LoadOptions o;
  const std::pair<const char*, const char*> values[] = {
      {"device", "cuda:1"},
      {"backend", "uring"},
      {"gds", "off"},
      {"host_register", "on"},
      {"threads", "6"},
      {"chunk", "2M"},
      {"cuda_chunk", "1MiB"},  // after chunk: the slot alone
      {"staging", "64MB"},
      {"queue_depth", "32"},
      {"direct_min_bytes", "512K"},
      {"copy_streams", "3"},
      {"resident_threshold", "0.25"},
      {"zero_copy", "false"},
      {"host_register_piece", "128M"},
      {"host_buffer_cache", "0"},
      {"uring_register_min", "1G"},
      {"local_world_size", "8"},
  };
  ASSERT_EQ(std::size(values), LoadOptionNames().size());
  for (size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(values[i].first, LoadOptionNames()[i]);
    Status s = SetLoadOption(o, values[i].first, values[i].second);
    EXPECT_TRUE(s.ok()) << values[i].first << ": " << s.ToString();
  }
  EXPECT_EQ(o.device, Device::Cuda(1));
  EXPECT_EQ(o.backend, Backend::kUring);
  EXPECT_EQ(o.gds, GdsMode::kOff);
  EXPECT_EQ(o.host_register, HostRegisterMode::kOn);
  EXPECT_EQ(o.threads, 6);
  EXPECT_EQ(o.chunk_bytes, 2u << 20);
  EXPECT_EQ(o.cuda_chunk_bytes, 1u << 20);
  EXPECT_EQ(o.staging_bytes, 64000000u);  // MB is decimal
  EXPECT_EQ(o.queue_depth, 32);
  EXPECT_EQ(o.direct_min_bytes, 512u << 10);
  EXPECT_EQ(o.copy_streams, 3);
  EXPECT_DOUBLE_EQ(o.resident_threshold, 0.25);
  EXPECT_FALSE(o.zero_copy);
  EXPECT_EQ(o.local_world_size, 8);
  EXPECT_EQ(o.host_register_piece_bytes, 128u << 20);
  EXPECT_EQ(o.host_buffer_cache_bytes, 0u);
  EXPECT_EQ(o.uring_register_min_bytes, 1u << 30);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate().ToString();
}

TEST(SetLoadOptionTest, ChunkSetsTheStagingSlotToo) {
  LoadOptions o;  // any device: the mapping does not depend on the order
  ASSERT_TRUE(SetLoadOption(o, "chunk", "16M").ok());
  EXPECT_EQ(o.chunk_bytes, 16u << 20);
  EXPECT_EQ(o.cuda_chunk_bytes, 16u << 20);
}

TEST(SetLoadOptionTest, BadNamesAndValuesNameTheKnob) {
  LoadOptions o;
  Status s = SetLoadOption(o, "chunk_bytes", "8M");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown load option 'chunk_bytes'"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("uring_register_min"), std::string::npos);
  const std::pair<const char*, const char*> bad[] = {
      {"threads", "two"},
      {"threads", "2.5"},
      {"threads", ""},
      {"queue_depth", "99999999999"},
      {"chunk", "8X"},
      {"staging", "-1"},
      {"zero_copy", "yes"},
      {"resident_threshold", "most"},
      {"backend", "floppy"},
      {"gds", "maybe"},
      {"host_register", "1"},
      {"device", "tpu"},
      {"local_world_size", "many"},
  };
  for (const auto& [name, value] : bad) {
    LoadOptions fresh;
    Status e = SetLoadOption(fresh, name, value);
    EXPECT_EQ(e.code(), StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_NE(e.message().find(value), std::string::npos) << e.ToString();
  }
  // The numbers' and switches' refusals in full: knob, value, what it wants.
  const std::pair<std::pair<const char*, const char*>, const char*> said[] = {
      {{"threads", "2.5"},
       "option threads = '2.5': expected a decimal integer"},
      {{"copy_streams", ""},
       "option copy_streams = '': expected a decimal integer"},
      {{"resident_threshold", "most"},
       "option resident_threshold = 'most': expected a decimal number"},
      {{"zero_copy", "yes"},
       "option zero_copy = 'yes': expected true or false"},
  };
  for (const auto& [kv, message] : said) {
    LoadOptions fresh;
    EXPECT_EQ(SetLoadOption(fresh, kv.first, kv.second).message(), message);
  }
}

TEST(LoadOptionsTest, ToStringNamesEveryKnobButTheDevice) {
  LoadOptions o;
  const std::string s = o.ToString();
  for (std::string_view name : LoadOptionNames()) {
    if (name == "device") continue;
    EXPECT_NE(s.find(std::string(name) + " "), std::string::npos)
        << name << " missing from: " << s;
  }
  EXPECT_NE(s.find("chunk 8.00 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("threads auto"), std::string::npos) << s;
  EXPECT_NE(s.find("cuda_chunk auto"), std::string::npos) << s;
  o.uring_register_min_bytes = SIZE_MAX;
  EXPECT_NE(o.ToString().find("uring_register_min never"), std::string::npos);
}

}  // namespace
}  // namespace weightlift
