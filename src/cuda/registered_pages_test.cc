// RegisteredPages and the slot it lives in, on any machine: with a usable
// cuda:0 the pages really register; without one (CI, the development VM)
// registering fails per file with CUDA's error, and the load would stage
// saying so. What a load asks of it (MadeFor, InPlace, FileMapping,
// Shortfall, the declined record) is checked either way.
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
  auto pages = RegisteredPages::Start(0, std::move(files), 42, "rows left");
  pages->Wait();
  pages->Stop();
  EXPECT_EQ(pages->bytes(), 6 * kPage);
  EXPECT_EQ(pages->registered_file_bytes(1), 0u);  // no such file asked for
  EXPECT_TRUE(pages->declined().empty());
  EXPECT_EQ(pages->left_out(), "rows left");
  EXPECT_TRUE(pages->MadeFor(42));
  EXPECT_FALSE(pages->MadeFor(43));

  // Blocks inside the spans (a strided one over pages 4-7), and one that
  // reaches page 2, which is not registered.
  const TensorSelection inside = Rows(100, 50, 1, 0);
  const TensorSelection strided = Rows(4 * kPage + 8, 64, 8, 1000);
  const TensorSelection outside = Rows(kPage, kPage + 1, 1, 0);
  TensorSelection other_file = inside;
  other_file.file = 1;
  EXPECT_EQ(pages->InPlace(outside), nullptr);
  EXPECT_EQ(pages->InPlace(other_file), nullptr);  // no such file registered
  EXPECT_EQ(pages->FileMapping(1), nullptr);
  EXPECT_EQ(pages->Shortfall(1), "");

  std::string no_device;
  if (CudaDeviceAvailable(0, &no_device)) {
    EXPECT_EQ(pages->registered_bytes(), pages->bytes());
    EXPECT_EQ(pages->registered_file_bytes(0), pages->bytes());
    EXPECT_NE(pages->InPlace(inside), nullptr);
    EXPECT_EQ(pages->InPlace(strided), pages->InPlace(inside));
    EXPECT_EQ(pages->FileMapping(0), pages->InPlace(inside));
    EXPECT_EQ(pages->Shortfall(0), "");
  } else {
    // No device: the registration failed and says where and why.
    EXPECT_EQ(pages->registered_bytes(), 0u);
    EXPECT_EQ(pages->InPlace(inside), nullptr);
    EXPECT_EQ(pages->FileMapping(0), nullptr);
    const std::string why = pages->Shortfall(0);
    EXPECT_NE(why.find("could not register"), std::string::npos) << why;
    EXPECT_NE(why.find(path_), std::string::npos) << why;
  }
}

// Stopped before it began: nothing is registered, nothing is in place, and
// the shortfall counts the spans.
TEST_F(RegisteredPagesTest, StoppedEarlyPutsNothingInPlaceAndSaysHowFar) {
  std::vector<RegisterFile> files;
  files.push_back(MapWith({{0, 2 * kPage}, {4 * kPage, 8 * kPage}}));
  auto pages = RegisteredPages::Start(0, std::move(files), 7, "");
  pages->Stop();
  const uint64_t done = pages->registered_file_bytes(0);
  EXPECT_TRUE(done == 0 || done == 2 * kPage || done == 6 * kPage) << done;
  if (done < 6 * kPage) {
    // Stopped after DONE bytes, or (no device) failed at once.
    std::string no_device;
    const std::string why = pages->Shortfall(0);
    EXPECT_NE(
        why.find(CudaDeviceAvailable(0, &no_device) ? "of its 2 page spans"
                                                    : "could not register"),
        std::string::npos)
        << why;
    EXPECT_EQ(pages->InPlace(Rows(4 * kPage, 64, 1, 0)), nullptr);
  }
}

TEST_F(RegisteredPagesTest, ADeclinedRecordNamesWhyAndIsForItsLoadOnly) {
  auto declined = RegisteredPages::Declined(3, 9, "its pages are 8x its bytes");
  EXPECT_EQ(declined->device(), 3);
  EXPECT_EQ(declined->declined(), "its pages are 8x its bytes");
  EXPECT_EQ(declined->bytes(), 0u);
  EXPECT_TRUE(declined->MadeFor(9));
  EXPECT_FALSE(declined->MadeFor(10));
  EXPECT_EQ(declined->InPlace(Rows(0, 10, 1, 0)), nullptr);
  EXPECT_EQ(declined->FileMapping(0), nullptr);
}

TEST(PreparedPagesSlotTest, TakeEmptiesAndRestoreNeverOverwritesANewerPut) {
  PreparedPagesSlot slot;
  EXPECT_EQ(slot.Take(), nullptr);
  auto a = RegisteredPages::Declined(0, 1, "a");
  auto b = RegisteredPages::Declined(0, 1, "b");
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
