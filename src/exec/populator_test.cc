// Populator on real fresh anonymous memory: which pages the kernel made
// resident (mincore) says what it populated.
#include "exec/populator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "env/mapping.h"

namespace weightlift::internal {
namespace {

constexpr uint64_t kChunk = 5u << 20;  // more than one 4 MiB piece
constexpr size_t kChunks = 8;

// Resident 4 KiB pages of [P, P + BYTES).
size_t ResidentPages(std::byte* p, uint64_t bytes) {
  std::vector<unsigned char> v(bytes / 4096);
  EXPECT_EQ(::mincore(p, bytes, v.data()), 0) << std::strerror(errno);
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(PopulatorTest, ThreadsFaultInChunksNotYetTakenAndSkipTakenOnes) {
  auto m = Mapping::Anonymous(kChunks * kChunk, "populator test");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::byte* base = m->data();
  ASSERT_EQ(ResidentPages(base, kChunks * kChunk), 0u);
  Plan plan;
  for (size_t i = 0; i < kChunks; ++i) {
    ReadChunk c;
    c.offset = i * kChunk;
    c.length = kChunk;
    // Two scatters per chunk, the second starting mid-page.
    c.scatters.push_back(Scatter{
        0, reinterpret_cast<uintptr_t>(base) + i * kChunk, kChunk / 2 + 100});
    c.scatters.push_back(Scatter{
        kChunk / 2 + 100,
        reinterpret_cast<uintptr_t>(base) + i * kChunk + kChunk / 2 + 100,
        kChunk / 2 - 100});
    plan.chunks.push_back(std::move(c));
  }
  std::atomic<size_t> next_chunk{2};  // workers took chunks 0 and 1
  Populator pop(plan, &next_chunk, 3);
  std::byte* rest = base + 2 * kChunk;
  const uint64_t rest_bytes = (kChunks - 2) * kChunk;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ResidentPages(rest, rest_bytes) < rest_bytes / 4096 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int refused = pop.Finish();
  if (refused == EINVAL) {
    GTEST_SKIP() << "the kernel has no MADV_POPULATE_WRITE (before 5.14)";
  }
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(ResidentPages(rest, rest_bytes), rest_bytes / 4096);
  EXPECT_EQ(ResidentPages(base, 2 * kChunk), 0u);
  // Populated pages are zero, as fresh memory is.
  for (uint64_t o = 0; o < rest_bytes; o += 4096) {
    ASSERT_EQ(rest[o], std::byte{0}) << o;
  }
}

TEST(PopulatorTest, FinishStopsEarlyAndTwiceIsHarmless) {
  auto m = Mapping::Anonymous(kChunks * kChunk, "populator test");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Plan plan;
  ReadChunk c;
  c.length = kChunks * kChunk;
  c.scatters.push_back(
      Scatter{0, reinterpret_cast<uintptr_t>(m->data()), kChunks * kChunk});
  plan.chunks.push_back(std::move(c));
  std::atomic<size_t> next_chunk{0};
  Populator pop(plan, &next_chunk, Populator::DefaultThreads());
  const int first = pop.Finish();
  EXPECT_TRUE(first == 0 || first == EINVAL) << first;
  EXPECT_EQ(pop.Finish(), first);
  EXPECT_GE(Populator::DefaultThreads(), 1);
  EXPECT_LE(Populator::DefaultThreads(), 4);
}

}  // namespace
}  // namespace weightlift::internal

namespace weightlift::internal {
namespace {

// MostlyFresh: untouched anonymous memory is fresh; once written, not; a
// few touched pages among many fresh ones do not change that; an address
// no mapping holds, or no bytes, is not.
TEST(MostlyFreshTest, TellsFreshMemoryFromWrittenMemory) {
  constexpr uint64_t kBytes = 8u << 20;
  auto m = Mapping::Anonymous(kBytes, "mostly fresh test");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const uintptr_t base = reinterpret_cast<uintptr_t>(m->data());
  // Two destinations: the first and second halves, one mid-page.
  const std::vector<uintptr_t> dsts = {base, base + kBytes / 2 + 100};
  const std::vector<uint64_t> sizes = {kBytes / 2 + 100, kBytes / 2 - 100};
  EXPECT_TRUE(MostlyFresh(dsts, sizes));
  std::memset(m->data(), 1, 16 * 4096);  // a few pages
  EXPECT_TRUE(MostlyFresh(dsts, sizes));
  std::memset(m->data(), 1, kBytes);
  EXPECT_FALSE(MostlyFresh(dsts, sizes));

  const std::vector<uint64_t> none = {0, 0};
  EXPECT_FALSE(MostlyFresh(dsts, none));
  auto small = Mapping::Anonymous(kBytes, "small");  // fresh, but 64 KiB
  ASSERT_TRUE(small.ok());
  const std::vector<uintptr_t> small_at = {
      reinterpret_cast<uintptr_t>(small->data())};
  const std::vector<uint64_t> small_size = {64u << 10};
  EXPECT_FALSE(MostlyFresh(small_at, small_size));
  auto gone = Mapping::Anonymous(kBytes, "unmapped");
  ASSERT_TRUE(gone.ok());
  const uintptr_t unmapped = reinterpret_cast<uintptr_t>(gone->data());
  *gone = Mapping();  // unmaps it
  const std::vector<uintptr_t> bad = {unmapped};
  const std::vector<uint64_t> bad_size = {kBytes};
  EXPECT_FALSE(MostlyFresh(bad, bad_size));
}

}  // namespace
}  // namespace weightlift::internal
