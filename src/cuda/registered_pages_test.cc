// RegisteredPages and the slot it lives in, on any machine: with a usable
// cuda:0 the pages really register; without one (CI, the development VM)
// registering fails per file with CUDA's error, and the load would stage
// saying so. What a load asks of it (Holds, CoveringMapping, the declined
// record) is checked either way.
#include "cuda/registered_pages.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuda/device_available.h"
#include "env/testing/temp_dir.h"
#include "format/prepared_pages.h"

namespace weightlift::internal {
namespace {

constexpr uint64_t kPage = 4096;

TensorSelection Rows(uint64_t offset, uint64_t width, uint64_t rows,
                     uint64_t pitch) {
  TensorSelection s;
  s.blocks.push_back({offset, width, rows, rows > 1 ? pitch : 0});
  s.bytes = width * rows;
  return s;
}

class RegisteredPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("f.bin");
    testing::WriteFileOrDie(path_, testing::RandomBytes(16 * kPage, 3));
  }
  RegisterFile MapWith(std::vector<PageSpan> spans) {
    const int fd = ::open(path_.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    auto map = Mapping::OfDescriptor(fd, path_, 0, 16 * kPage, false);
    ::close(fd);
    EXPECT_TRUE(map.ok()) << map.status().ToString();
    RegisterFile f;
    f.file = 0;
    f.path = path_;
    f.map = std::move(*map);
    f.spans = std::move(spans);
    return f;
  }
  testing::TempDir dir_;
  std::string path_;
};

TEST_F(RegisteredPagesTest, RegistersOrSaysWhyAndHoldsOnlyItsSpans) {
  std::vector<RegisterFile> files;
  files.push_back(MapWith({{0, 2 * kPage}, {4 * kPage, 8 * kPage}}));
  auto pages = RegisteredPages::Start(0, std::move(files));
  pages->Wait();
  pages->Stop();
  EXPECT_EQ(pages->bytes(), 6 * kPage);
  EXPECT_EQ(pages->file_bytes(0), 6 * kPage);
  EXPECT_EQ(pages->file_bytes(1), 0u);
  EXPECT_TRUE(pages->declined().empty());

  // Blocks inside the spans (a strided one over pages 4-7), and one that
  // reaches page 2, which is not registered.
  std::vector<TensorSelection> inside = {Rows(100, 50, 1, 0),
                                         Rows(4 * kPage + 8, 64, 8, 1000)};
  std::vector<TensorSelection> outside = {Rows(kPage, kPage + 1, 1, 0)};
  EXPECT_TRUE(pages->Holds(0, inside));
  EXPECT_FALSE(pages->Holds(0, outside));
  EXPECT_FALSE(pages->Holds(1, inside));  // no such file registered

  std::string why;
  std::string no_device;
  if (CudaDeviceAvailable(0, &no_device)) {
    EXPECT_EQ(pages->registered_bytes(), pages->bytes());
    EXPECT_NE(pages->CoveringMapping(0, inside, &why), nullptr) << why;
    EXPECT_EQ(pages->CoveringMapping(0, outside, &why), nullptr);
    EXPECT_NE(why.find("prepared for another request"), std::string::npos)
        << why;
  } else {
    // No device: the registration failed and says where and why.
    EXPECT_EQ(pages->registered_bytes(), 0u);
    EXPECT_EQ(pages->CoveringMapping(0, inside, &why), nullptr);
    EXPECT_NE(why.find("could not register"), std::string::npos) << why;
    EXPECT_NE(why.find(path_), std::string::npos) << why;
  }
  EXPECT_EQ(pages->CoveringMapping(1, inside, &why), nullptr);
  EXPECT_NE(why.find("registered none"), std::string::npos) << why;
}

TEST_F(RegisteredPagesTest, ADeclinedRecordNamesWhyForEveryFile) {
  auto declined = RegisteredPages::Declined(3, "its pages are 8x its bytes");
  EXPECT_EQ(declined->device(), 3);
  EXPECT_EQ(declined->declined(), "its pages are 8x its bytes");
  EXPECT_EQ(declined->bytes(), 0u);
  std::string why;
  std::vector<TensorSelection> sels = {Rows(0, 10, 1, 0)};
  EXPECT_FALSE(declined->Holds(0, sels));
  EXPECT_EQ(declined->CoveringMapping(0, sels, &why), nullptr);
  EXPECT_EQ(why, "prepare registered no pages: its pages are 8x its bytes");
}

TEST(PreparedPagesSlotTest, TakeEmptiesAndRestoreNeverOverwritesANewerPut) {
  PreparedPagesSlot slot;
  EXPECT_EQ(slot.Take(), nullptr);
  auto a = RegisteredPages::Declined(0, "a");
  auto b = RegisteredPages::Declined(0, "b");
  slot.Put(a);
  auto taken = slot.Take();
  EXPECT_EQ(taken, a);
  EXPECT_EQ(slot.Take(), nullptr);
  slot.Restore(taken);  // the load did not use it: back for its own load
  EXPECT_EQ(slot.Take(), a);
  slot.Put(b);      // a newer prepare came while a load held A
  slot.Restore(a);  // A is stale: B stays
  EXPECT_EQ(slot.Take(), b);
}

}  // namespace
}  // namespace weightlift::internal
