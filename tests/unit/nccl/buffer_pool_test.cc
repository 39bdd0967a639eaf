#include "transport/nccl/buffer_pool.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::nccl {
namespace {

TEST(BufferPoolTest, CapacityIsTheSizeUpTo64KiBThenRoundedTo64KiB) {
  EXPECT_EQ(BufferPool::CapacityFor(0), 1u);
  EXPECT_EQ(BufferPool::CapacityFor(1), 1u);
  EXPECT_EQ(BufferPool::CapacityFor(1000), 1000u);
  EXPECT_EQ(BufferPool::CapacityFor(65536), 65536u);
  EXPECT_EQ(BufferPool::CapacityFor(65537), 131072u);
  EXPECT_EQ(BufferPool::CapacityFor(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(BufferPool::CapacityFor((size_t{1} << 20) + 32), (size_t{1} << 20) + 65536);
}

TEST(BufferPoolTest, ABufferIsWritableAndComesBackWhenDropped) {
  BufferPool pool;
  EXPECT_EQ(pool.stats().free_buffers, 0u);
  std::shared_ptr<uint8_t> a = pool.Get(1000);
  ASSERT_NE(a, nullptr);
  memset(a.get(), 0x5a, 1000);
  uint8_t* const raw = a.get();
  std::shared_ptr<uint8_t> copy = a;  // the transport's reference
  a.reset();
  EXPECT_EQ(pool.stats().free_buffers, 0u) << "still referenced";
  copy.reset();
  EXPECT_EQ(pool.stats().free_buffers, 1u);
  EXPECT_EQ(pool.stats().free_bytes, 1000u);
  std::shared_ptr<uint8_t> b = pool.Get(1000);
  EXPECT_EQ(b.get(), raw) << "reused";
  EXPECT_EQ(pool.stats().free_buffers, 0u);
  EXPECT_EQ(pool.stats().free_bytes, 0u);
}

TEST(BufferPoolTest, ZeroBytesGetsABuffer) {
  BufferPool pool;
  std::shared_ptr<uint8_t> a = pool.Get(0);
  ASSERT_NE(a, nullptr);
  a.reset();
  EXPECT_EQ(pool.stats().free_bytes, 1u);
}

// A free buffer serves a request of `want` bytes when its capacity is in
// [want, 2 x want + 64 KiB]: big enough, and not wasting more than that.
TEST(BufferPoolTest, ReusesOnlyBuffersOfAFittingCapacity) {
  BufferPool pool;
  uint8_t* raw = nullptr;
  {
    std::shared_ptr<uint8_t> a = pool.Get(100000);  // capacity 131072
    raw = a.get();
  }
  ASSERT_EQ(pool.stats().free_bytes, 131072u);
  {
    std::shared_ptr<uint8_t> big = pool.Get(131073);  // too small for this
    EXPECT_NE(big.get(), raw);
    std::shared_ptr<uint8_t> tiny = pool.Get(30000);  // 131072 > 2 x 30000 + 65536
    EXPECT_NE(tiny.get(), raw);
    EXPECT_EQ(pool.stats().free_buffers, 1u) << "the 128 KiB buffer is still free";
  }
  std::shared_ptr<uint8_t> fits = pool.Get(40000);  // 131072 <= 2 x 40000 + 65536
  EXPECT_EQ(fits.get(), raw);
}

TEST(BufferPoolTest, KeepsAtMost128FreeBuffers) {
  BufferPool pool;
  std::vector<std::shared_ptr<uint8_t>> held;
  for (int i = 0; i < 200; ++i) held.push_back(pool.Get(64));
  held.clear();
  EXPECT_EQ(pool.stats().free_buffers, BufferPool::kMaxFreeBuffers);
  EXPECT_EQ(pool.stats().free_bytes, BufferPool::kMaxFreeBuffers * 64);
}

TEST(BufferPoolTest, KeepsAtMost512MiBFree) {
  BufferPool pool;
  // Three 192 MiB buffers (never touched, so never resident): two fit under the bound.
  const size_t kBig = size_t{192} << 20;
  std::vector<std::shared_ptr<uint8_t>> held;
  for (int i = 0; i < 3; ++i) held.push_back(pool.Get(kBig));
  held.clear();
  EXPECT_EQ(pool.stats().free_buffers, 2u);
  EXPECT_EQ(pool.stats().free_bytes, 2 * kBig);
  EXPECT_LE(pool.stats().free_bytes, BufferPool::kMaxFreeBytes);
}

TEST(BufferPoolTest, BuffersMayOutliveThePool) {
  std::shared_ptr<uint8_t> a;
  {
    BufferPool pool;
    a = pool.Get(4096);
    std::shared_ptr<uint8_t> b = pool.Get(4096);  // freed into the pool, then with it
  }
  memset(a.get(), 1, 4096);
  a.reset();  // freed: the pool's shared state goes with the last buffer
}

TEST(BufferPoolTest, ManyThreadsGetAndDrop) {
  BufferPool pool;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &bad, t] {
      std::vector<std::shared_ptr<uint8_t>> mine;
      for (int i = 0; i < 2000; ++i) {
        const size_t size = 1 + static_cast<size_t>((i * 7919 + t * 104729) % 200000);
        std::shared_ptr<uint8_t> b = pool.Get(size);
        if (b == nullptr) ++bad;
        b.get()[0] = static_cast<uint8_t>(t);
        b.get()[size - 1] = static_cast<uint8_t>(i);
        if (b.get()[0] != static_cast<uint8_t>(t)) ++bad;
        mine.push_back(std::move(b));
        if (mine.size() > 16) mine.erase(mine.begin());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(pool.stats().free_buffers, BufferPool::kMaxFreeBuffers);
  EXPECT_LE(pool.stats().free_bytes, BufferPool::kMaxFreeBytes);
}

}  // namespace
}  // namespace longhaul::nccl
