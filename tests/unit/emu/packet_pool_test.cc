#include "transport/emu/packet_pool.h"

#include <cstring>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::emu {
namespace {

TEST(PacketPoolTest, SlotsAreDistinctWritableAndBounded) {
  PacketPool pool(1000, 1024 * 300);  // 1024-byte slots (rounded to 64), 300 of them
  EXPECT_EQ(pool.slot_bytes(), 1024u);
  EXPECT_EQ(pool.max_slots(), 300u);
  std::set<uint32_t> seen;
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < pool.max_slots(); ++i) {
    uint32_t s = pool.Acquire();
    ASSERT_NE(s, PacketPool::kNoSlot);
    EXPECT_TRUE(seen.insert(s).second);
    std::memset(pool.Data(s), static_cast<int>(i & 0xff), pool.slot_bytes());
    slots.push_back(s);
  }
  EXPECT_EQ(pool.Acquire(), PacketPool::kNoSlot);
  EXPECT_EQ(pool.in_use(), 300u);
  for (size_t i = 0; i < slots.size(); ++i) {
    ASSERT_EQ(pool.Data(slots[i])[0], static_cast<uint8_t>(i & 0xff));
    ASSERT_EQ(pool.Data(slots[i])[pool.slot_bytes() - 1], static_cast<uint8_t>(i & 0xff));
  }
  pool.Release(slots[17]);
  EXPECT_EQ(pool.Acquire(), slots[17]);  // LIFO reuse
  EXPECT_EQ(pool.peak_in_use(), 300u);
}

TEST(PacketPoolTest, AllocatesLazily) {
  PacketPool pool(9000, size_t{1} << 30);
  EXPECT_EQ(pool.allocated_slots(), 0u);
  uint32_t s = pool.Acquire();
  EXPECT_EQ(pool.allocated_slots(), PacketPool::kSlotsPerChunk);
  pool.Release(s);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(PacketPoolTest, TinyCapStillAllowsOneChunk) {
  PacketPool pool(64, 1);
  EXPECT_EQ(pool.max_slots(), PacketPool::kSlotsPerChunk);
}

}  // namespace
}  // namespace longhaul::emu
