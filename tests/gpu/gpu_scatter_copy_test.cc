// CopyScatterToDevice (src/cuda/scatter_copy.h), the one copy both CUDA
// sinks deliver through: a contiguous piece and a strided one (a slice's
// rows, one cudaMemcpy2DAsync) land bit-exact at their device address, a
// scatter list delivers several pieces out of one chunk, and a refused
// enqueue is an error naming the call, rows, pitch and tensor that leaves
// the stream usable. Skips with the reason when cuda:0 cannot be used.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/device_available.h"
#include "cuda/scatter_copy.h"

namespace weightlift::internal {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

class ScatterCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceAvailable(0, &why)) {
      GTEST_SKIP() << "no usable CUDA device: " << why;
    }
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    auto host = PinnedBuffer::Allocate(kChunkBytes);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(*host);
    std::mt19937_64 rng(42);
    for (size_t i = 0; i < kChunkBytes; ++i) {
      host_.data()[i] = static_cast<std::byte>(rng() & 0xff);
    }
    auto dev = DeviceBuffer::Allocate(0, kChunkBytes);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    dev_ = std::move(*dev);
    // Poison the destination so a copy that did not happen shows.
    ASSERT_EQ(cudaMemset(dev_.data(), 0xA5, kChunkBytes), cudaSuccess);
    // cudaMemset may return before it ran, and stream_ (non-blocking) does
    // not wait for the legacy stream: without this the poison can land
    // after the copy under test (seen once on an H200, session 23).
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
              cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // N bytes of device memory at OFFSET, copied back after the stream drains.
  std::vector<uint8_t> Device(size_t offset, size_t n) {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<uint8_t> out(n);
    EXPECT_EQ(
        cudaMemcpy(out.data(), dev_.data() + offset, n, cudaMemcpyDeviceToHost),
        cudaSuccess);
    return out;
  }
  // What SC must put on the device: its rows gathered from the chunk on
  // the host, packed.
  std::vector<uint8_t> Expected(const Scatter& sc) const {
    std::vector<uint8_t> out;
    const auto* p = reinterpret_cast<const uint8_t*>(host_.data());
    for (uint64_t r = 0; r < std::max<uint64_t>(sc.rows, 1); ++r) {
      const uint8_t* row = p + sc.chunk_offset + r * sc.src_pitch;
      out.insert(out.end(), row, row + sc.length);
    }
    return out;
  }
  Scatter Piece(uint64_t chunk_offset, uint64_t dst_offset, uint64_t length,
                uint64_t rows = 1, uint64_t pitch = 0) const {
    Scatter sc;
    sc.chunk_offset = chunk_offset;
    sc.dst = reinterpret_cast<uintptr_t>(dev_.data() + dst_offset);
    sc.length = length;
    sc.tensor = 7;
    sc.rows = rows;
    sc.src_pitch = pitch;
    return sc;
  }

  PinnedBuffer host_;
  DeviceBuffer dev_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(ScatterCopyTest, ContiguousPieceLandsBitExact) {
  const Scatter sc = Piece(/*chunk_offset=*/4097, /*dst_offset=*/333, 70001);
  ASSERT_TRUE(CopyScatterToDevice(sc, host_.data(), stream_).ok());
  EXPECT_EQ(Device(333, sc.bytes()), Expected(sc));
  // The bytes after the piece were not written.
  EXPECT_EQ(Device(333 + sc.bytes(), 16), std::vector<uint8_t>(16, 0xA5));
}

TEST_F(ScatterCopyTest, StridedRowsArePackedOnTheDevice) {
  // 300 rows of 129 bytes, 1000 bytes apart: a column slice's row runs.
  const Scatter sc = Piece(/*chunk_offset=*/17, /*dst_offset=*/4096, 129,
                           /*rows=*/300, /*pitch=*/1000);
  ASSERT_TRUE(CopyScatterToDevice(sc, host_.data(), stream_).ok());
  const std::vector<uint8_t> want = Expected(sc);
  ASSERT_EQ(want.size(), 300u * 129u);
  EXPECT_EQ(Device(4096, sc.bytes()), want);
  EXPECT_EQ(Device(4096 + sc.bytes(), 16), std::vector<uint8_t>(16, 0xA5));
}

TEST_F(ScatterCopyTest, SeveralPiecesOfOneChunk) {
  const std::vector<Scatter> pieces = {
      Piece(0, 0, 4096), Piece(8192, 65536, 64, 512, 256),
      Piece(500000, 200000, 1), Piece(600000, 300000, 4096, 2, 8192)};
  for (const Scatter& sc : pieces) {
    ASSERT_TRUE(CopyScatterToDevice(sc, host_.data(), stream_).ok());
  }
  for (const Scatter& sc : pieces) {
    const size_t at = sc.dst - reinterpret_cast<uintptr_t>(dev_.data());
    EXPECT_EQ(Device(at, sc.bytes()), Expected(sc)) << "piece at " << at;
  }
}

TEST_F(ScatterCopyTest, RefusedEnqueueNamesTheCopyAndLeavesTheStreamUsable) {
  // A source pitch shorter than a row: cudaMemcpy2DAsync refuses it.
  const Scatter bad = Piece(0, 0, 256, /*rows=*/4, /*pitch=*/100);
  const Status s = CopyScatterToDevice(bad, host_.data(), stream_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCudaError) << s.ToString();
  const std::string& m = s.message();
  for (const char* part :
       {"cudaMemcpy2DAsync of 1024 bytes", "4 rows of 256", "source pitch 100",
        "tensor #7", "cudaErrorInvalidPitchValue"}) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  }
  // Nothing of it was copied, and the next copy works.
  EXPECT_EQ(Device(0, 1024), std::vector<uint8_t>(1024, 0xA5));
  const Scatter good = Piece(64, 0, 1024);
  ASSERT_TRUE(CopyScatterToDevice(good, host_.data(), stream_).ok());
  EXPECT_EQ(Device(0, 1024), Expected(good));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace weightlift::internal
