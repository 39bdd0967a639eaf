#include "transport/fec/interleaver.h"

#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::fec {
namespace {

TEST(InterleaverTest, DepthOneIsConsecutiveBlocks) {
  for (uint64_t j = 0; j < 100; ++j) {
    const InterleaveSlot s = MapToBlock(j, 8, 1);
    EXPECT_EQ(s.block_id, j / 8);
    EXPECT_EQ(s.shard_index, j % 8);
    EXPECT_EQ(s.opens_block, j % 8 == 0);
    EXPECT_EQ(s.closes_block, j % 8 == 7);
    EXPECT_EQ(s.closes_group, j % 8 == 7);
  }
}

TEST(InterleaverTest, MappingTableForDepthThree) {
  // k = 2, D = 3: packets 0..5 -> (block, shard) (0,0) (1,0) (2,0) (0,1) (1,1) (2,1).
  const std::vector<std::pair<uint64_t, uint32_t>> want = {{10, 0}, {11, 0}, {12, 0}, {10, 1},
                                                           {11, 1}, {12, 1}, {13, 0}, {14, 0}};
  for (size_t j = 0; j < want.size(); ++j) {
    const InterleaveSlot s = MapToBlock(j, 2, 3, /*base_block=*/10);
    EXPECT_EQ(s.block_id, want[j].first) << j;
    EXPECT_EQ(s.shard_index, want[j].second) << j;
  }
  EXPECT_TRUE(MapToBlock(5, 2, 3).closes_group);
  EXPECT_FALSE(MapToBlock(4, 2, 3).closes_group);
  EXPECT_TRUE(MapToBlock(3, 2, 3).closes_block);
}

TEST(InterleaverTest, EachBlockGetsKShardsSpacedDApart) {
  for (uint32_t k : {1u, 4u, 32u}) {
    for (uint32_t d : {1u, 3u, 8u, 16u}) {
      std::map<uint64_t, std::vector<uint64_t>> packets_of;  // block -> packet numbers
      const uint64_t n = 5ull * k * d;
      for (uint64_t j = 0; j < n; ++j) {
        const InterleaveSlot s = MapToBlock(j, k, d);
        ASSERT_EQ(s.shard_index, packets_of[s.block_id].size());
        packets_of[s.block_id].push_back(j);
      }
      ASSERT_EQ(packets_of.size(), 5u * d);
      uint64_t expected_id = 0;
      for (const auto& [id, pk] : packets_of) {
        EXPECT_EQ(id, expected_id++);  // consecutive ids
        ASSERT_EQ(pk.size(), k);
        for (size_t i = 1; i < pk.size(); ++i) EXPECT_EQ(pk[i] - pk[i - 1], d);
      }
    }
  }
}

TEST(InterleaverTest, BurstOfDLossesHitsEachBlockOnce) {
  const uint32_t k = 32, d = 8;
  for (uint64_t start = 0; start < 3 * k * d; start += 5) {
    std::map<uint64_t, int> hits;
    for (uint64_t j = start; j < start + d; ++j) ++hits[MapToBlock(j, k, d).block_id];
    for (const auto& [id, count] : hits) EXPECT_EQ(count, 1) << "burst at " << start;
  }
}

TEST(InterleaverTest, StatefulMatchesPureMapping) {
  Interleaver il(4, 3, /*first_block_id=*/100);
  for (uint64_t j = 0; j < 120; ++j) {
    const InterleaveSlot a = il.Next();
    const InterleaveSlot b = MapToBlock(j, 4, 3, 100);
    EXPECT_EQ(a.block_id, b.block_id);
    EXPECT_EQ(a.shard_index, b.shard_index);
    EXPECT_EQ(a.closes_group, b.closes_group);
  }
  EXPECT_EQ(il.packets_in_group(), 0u);
  EXPECT_EQ(il.group_base(), 100u + 120 / 4);
}

TEST(InterleaverTest, FlushClosesPartialBlocksAndKeepsIdsConsecutive) {
  Interleaver il(4, 3);
  EXPECT_TRUE(il.Flush().empty());
  // 7 packets of a 12-packet group: blocks 0,1,2 hold 3,2,2 shards.
  for (int j = 0; j < 7; ++j) il.Next();
  auto closed = il.Flush();
  ASSERT_EQ(closed.size(), 3u);
  EXPECT_EQ(closed[0].block_id, 0u);
  EXPECT_EQ(closed[0].data_shards, 3u);
  EXPECT_EQ(closed[1].data_shards, 2u);
  EXPECT_EQ(closed[2].data_shards, 2u);
  EXPECT_EQ(closed[2].block_in_group, 2u);
  // 2 packets: only blocks 3 and 4 exist; the next group starts at 5.
  EXPECT_EQ(il.Next().block_id, 3u);
  EXPECT_EQ(il.Next().block_id, 4u);
  EXPECT_EQ(il.next_block_id(), 5u);
  closed = il.Flush();
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[1].block_id, 4u);
  EXPECT_EQ(closed[1].data_shards, 1u);
  const InterleaveSlot s = il.Next();
  EXPECT_EQ(s.block_id, 5u);
  EXPECT_TRUE(s.opens_block);
}

TEST(InterleaverTest, FlushSkipsBlocksAlreadyFull) {
  Interleaver il(2, 3);  // group of 6
  int closed_by_slot = 0;
  for (int j = 0; j < 5; ++j) closed_by_slot += il.Next().closes_block;
  EXPECT_EQ(closed_by_slot, 2);  // blocks 0 and 1 are full
  auto closed = il.Flush();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].block_id, 2u);
  EXPECT_EQ(closed[0].block_in_group, 2u);
  EXPECT_EQ(closed[0].data_shards, 1u);
}

TEST(InterleaverTest, ReconfigureOnlyBetweenGroups) {
  Interleaver il(4, 2);
  il.Next();
  EXPECT_EQ(il.Reconfigure(8, 4).code(), absl::StatusCode::kFailedPrecondition);
  il.Flush();
  EXPECT_EQ(il.Reconfigure(0, 4).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(il.Reconfigure(8, 4).ok());
  EXPECT_EQ(il.k(), 8u);
  EXPECT_EQ(il.depth(), 4u);
  EXPECT_EQ(il.Next().block_id, 1u);
}

}  // namespace
}  // namespace longhaul::fec
