#include "transport/fec/block_decoder.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fec_shards.h"
#include "transport/base/rng.h"
#include "transport/fec/block_encoder.h"

namespace longhaul::fec {
namespace {

// A block encoded through BlockEncoder: variable-length data shards and their parity.
struct Block {
  int k_nominal = 0, k = 0, m = 0;
  size_t length = 0;
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<uint8_t>> parity;

  std::vector<uint8_t> Padded(int j) const {
    std::vector<uint8_t> v(length, 0);
    std::copy(data[j].begin(), data[j].end(), v.begin());
    return v;
  }
};

Block MakeBlock(FecCodec& codec, ShardPool& pool, Rng& rng, int k_nominal, int k, int m,
                size_t max_len) {
  Block b;
  b.k_nominal = k_nominal;
  b.k = k;
  b.m = m;
  BlockEncoder enc(&codec, &pool);
  EXPECT_TRUE(enc.Begin(0, k_nominal, m).ok());
  for (int j = 0; j < k; ++j) {
    std::vector<uint8_t> s(1 + rng.UniformInt(max_len));
    for (auto& x : s) x = static_cast<uint8_t>(rng.Next());
    EXPECT_TRUE(enc.AddDataShard(j, s.data(), s.size()).ok());
    b.data.push_back(std::move(s));
  }
  auto ps = enc.Finish(k);
  EXPECT_TRUE(ps.ok());
  b.length = ps->shard_length();
  for (int r = 0; r < m; ++r) b.parity.emplace_back(ps->shard(r), ps->shard(r) + b.length);
  return b;
}

absl::Status Feed(BlockDecoder& dec, const Block& b, bool parity, int index) {
  if (parity) {
    return dec.AddShard(ShardInfo::Parity(index, b.k, b.m), b.parity[index].data(), b.length);
  }
  return dec.AddShard(ShardInfo::Data(index, b.k_nominal, b.m), b.data[index].data(),
                      b.data[index].size());
}

// Delivers the shards not in `erased` (size k + m) in a random order, then recovers and
// checks every erased data shard.
void DeliverAndCheck(BlockDecoder& dec, const Block& b, const std::vector<bool>& erased, Rng& rng) {
  std::vector<int> order(b.k + b.m);
  std::iota(order.begin(), order.end(), 0);
  for (int i = static_cast<int>(order.size()) - 1; i > 0; --i) {
    std::swap(order[i], order[rng.UniformInt(i + 1)]);
  }
  int lost_data = 0;
  for (int i : order) {
    if (erased[i]) {
      if (i < b.k) ++lost_data;
      continue;
    }
    ASSERT_TRUE(Feed(dec, b, i >= b.k, i >= b.k ? i - b.k : i).ok());
  }
  const int erased_total = static_cast<int>(std::count(erased.begin(), erased.end(), true));
  if (erased_total <= b.m) {  // any pattern of at most m erasures is recoverable
    const bool parity_arrived = erased_total - lost_data < b.m;
    if (lost_data == 0) {
      EXPECT_EQ(dec.complete(), parity_arrived);
      EXPECT_FALSE(dec.CanRecover());
      return;
    }
    ASSERT_TRUE(dec.CanRecover());
    auto rec = dec.Recover();
    ASSERT_TRUE(rec.ok()) << rec.status();
    ASSERT_EQ(static_cast<int>(rec->size()), lost_data);
    for (const RecoveredShard& s : *rec) {
      ASSERT_TRUE(erased[s.index]);
      ASSERT_EQ(s.length, b.length);
      EXPECT_EQ(std::vector<uint8_t>(s.bytes, s.bytes + s.length), b.Padded(s.index));
    }
    EXPECT_TRUE(dec.complete());
  } else {
    EXPECT_FALSE(dec.CanRecover());
    EXPECT_EQ(dec.Recover().status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(BlockDecoderTest, EveryErasurePatternOfStreamedBlock) {
  FecCodec codec;
  ShardPool pool(512);
  BlockDecoder dec(&codec, &pool);
  Rng rng(8);
  for (auto [k, m] : {std::make_pair(4, 2), std::make_pair(8, 3)}) {
    const Block b = MakeBlock(codec, pool, rng, k, k, m, 500);
    uint64_t n = testing::ForEachErasurePattern(k + m, m + 1, [&](const std::vector<bool>& e) {
      dec.Begin(42);
      DeliverAndCheck(dec, b, e, rng);
    });
    EXPECT_GT(n, 0u);
  }
  dec.Reset();
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST(BlockDecoderTest, SampledPatternsAtK32) {
  FecCodec codec;
  ASSERT_TRUE(codec.PrecomputeSingleErasures(32, 4).ok());
  ShardPool pool(8256);
  BlockDecoder dec(&codec, &pool);
  Rng rng(9);
  for (int trial = 0; trial < 60; ++trial) {
    const Block b = MakeBlock(codec, pool, rng, 32, 32, 4, 8234);
    dec.Begin(trial);
    DeliverAndCheck(dec, b, testing::RandomPattern(rng, 36, 1 + rng.UniformInt(5)), rng);
  }
  EXPECT_GT(
      codec.stats().decode_pinned_hits + codec.stats().decode_hits + codec.stats().decode_misses,
      0u);
}

TEST(BlockDecoderTest, ShortenedBlockLearnsSizeFromRepairShards) {
  FecCodec codec;
  ShardPool pool(1024);
  BlockDecoder dec(&codec, &pool);
  Rng rng(10);
  const Block b = MakeBlock(codec, pool, rng, /*k_nominal=*/16, /*k=*/5, /*m=*/3, 1000);
  dec.Begin(3);
  ASSERT_TRUE(Feed(dec, b, false, 0).ok());
  ASSERT_TRUE(Feed(dec, b, false, 2).ok());
  ASSERT_TRUE(Feed(dec, b, false, 4).ok());
  EXPECT_FALSE(dec.size_known());
  EXPECT_EQ(dec.missing_data_shards(), -1);
  EXPECT_FALSE(dec.CanRecover());
  EXPECT_EQ(dec.Recover().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Feed(dec, b, true, 1).ok());
  EXPECT_TRUE(dec.size_known());
  EXPECT_EQ(dec.missing_data_shards(), 2);
  EXPECT_FALSE(dec.CanRecover());
  ASSERT_TRUE(Feed(dec, b, true, 2).ok());
  ASSERT_TRUE(dec.CanRecover());
  auto rec = dec.Recover();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->size(), 2u);
  EXPECT_EQ((*rec)[0].index, 1);
  EXPECT_EQ((*rec)[1].index, 3);
  for (const auto& s : *rec) {
    EXPECT_EQ(std::vector<uint8_t>(s.bytes, s.bytes + s.length), b.Padded(s.index));
  }
  // Nothing left to do; a second Recover() returns nothing; late shards are duplicates.
  auto again = dec.Recover();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  ASSERT_TRUE(Feed(dec, b, false, 1).ok());
  EXPECT_EQ(dec.debug_state().duplicates, 1u);
  EXPECT_EQ(dec.debug_state().recovered, 2);
}

TEST(BlockDecoderTest, TooManyLossesFailThenRecoverWhenMoreArrive) {
  FecCodec codec;
  ShardPool pool(512);
  BlockDecoder dec(&codec, &pool);
  Rng rng(12);
  const Block b = MakeBlock(codec, pool, rng, 8, 8, 2, 400);
  dec.Begin(1);
  for (int j : {0, 1, 2, 3, 4}) ASSERT_TRUE(Feed(dec, b, false, j).ok());
  ASSERT_TRUE(Feed(dec, b, true, 0).ok());
  ASSERT_TRUE(Feed(dec, b, true, 1).ok());
  EXPECT_EQ(dec.missing_data_shards(), 3);
  EXPECT_FALSE(dec.CanRecover());
  auto failed = dec.Recover();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  // A retransmitted data shard arrives (selective repeat): now 8 of 10 are held.
  ASSERT_TRUE(Feed(dec, b, false, 6).ok());
  ASSERT_TRUE(dec.CanRecover());
  auto rec = dec.Recover();
  ASSERT_TRUE(rec.ok());
  ASSERT_EQ(rec->size(), 2u);
  EXPECT_EQ((*rec)[0].index, 5);
  EXPECT_EQ((*rec)[1].index, 7);
  EXPECT_EQ(std::vector<uint8_t>((*rec)[1].bytes, (*rec)[1].bytes + b.length), b.Padded(7));
}

TEST(BlockDecoderTest, RepairShardsAreNotCopiedWhenNotNeeded) {
  FecCodec codec;
  ShardPool pool(512);
  BlockDecoder dec(&codec, &pool);
  Rng rng(13);
  const Block b = MakeBlock(codec, pool, rng, 8, 8, 4, 500);
  dec.Begin(1);
  for (int j = 0; j < 8; ++j) ASSERT_TRUE(Feed(dec, b, false, j).ok());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(Feed(dec, b, true, r).ok());
  EXPECT_TRUE(dec.complete());
  EXPECT_EQ(dec.debug_state().parity_held, 0);
  EXPECT_EQ(dec.debug_state().parity_seen, 4);
  EXPECT_EQ(pool.outstanding(), 8u);
  // One data shard missing: only one repair shard is kept.
  dec.Begin(2);
  for (int j = 1; j < 8; ++j) ASSERT_TRUE(Feed(dec, b, false, j).ok());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(Feed(dec, b, true, r).ok());
  EXPECT_EQ(dec.debug_state().parity_held, 1);
  EXPECT_EQ(pool.outstanding(), 8u);
  ASSERT_TRUE(dec.Recover().ok());
  dec.Reset();
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST(BlockDecoderTest, RepairBeforeDataAndSameTablesAcrossBlocks) {
  FecCodec codec;
  ShardPool pool(512);
  BlockDecoder dec(&codec, &pool);
  Rng rng(14);
  for (int block = 0; block < 10; ++block) {
    const Block b = MakeBlock(codec, pool, rng, 8, 8, 2, 300);
    dec.Begin(block);
    ASSERT_TRUE(Feed(dec, b, true, 1).ok());
    ASSERT_TRUE(Feed(dec, b, true, 0).ok());
    for (int j = 0; j < 8; ++j) {
      if (j != 2 && j != 6) {
        ASSERT_TRUE(Feed(dec, b, false, j).ok());
      }
    }
    auto rec = dec.Recover();
    ASSERT_TRUE(rec.ok());
    ASSERT_EQ(rec->size(), 2u);
    EXPECT_EQ(std::vector<uint8_t>((*rec)[0].bytes, (*rec)[0].bytes + b.length), b.Padded(2));
  }
  // One erasure pattern: built once, then served from the cache.
  EXPECT_EQ(codec.stats().decode_misses, 1u);
  EXPECT_EQ(codec.stats().decode_hits, 9u);
}

TEST(BlockDecoderTest, PiecewiseShardsRoundTrip) {
  // A shard = 8-byte packet number + frames, encoded and decoded without assembling it.
  FecCodec codec;
  ShardPool pool(1024);
  BlockEncoder enc(&codec, &pool);
  BlockDecoder dec(&codec, &pool);
  Rng rng(15);
  const int k = 6, m = 2;
  std::vector<std::array<uint8_t, 8>> pn(k);
  std::vector<std::vector<uint8_t>> frames(k);
  ASSERT_TRUE(enc.Begin(9, k, m).ok());
  for (int j = 0; j < k; ++j) {
    for (auto& x : pn[j]) x = static_cast<uint8_t>(rng.Next());
    frames[j].resize(1 + rng.UniformInt(900));
    for (auto& x : frames[j]) x = static_cast<uint8_t>(rng.Next());
    const std::array<std::span<const uint8_t>, 2> parts = {std::span<const uint8_t>(pn[j]),
                                                           std::span<const uint8_t>(frames[j])};
    ASSERT_TRUE(enc.AddDataShardParts(j, parts).ok());
  }
  auto parity = enc.Finish(k);
  ASSERT_TRUE(parity.ok());
  dec.Begin(9);
  for (int j : {0, 2, 3, 5}) {
    const std::array<std::span<const uint8_t>, 2> parts = {std::span<const uint8_t>(pn[j]),
                                                           std::span<const uint8_t>(frames[j])};
    ASSERT_TRUE(dec.AddShardParts(ShardInfo::Data(j, k, m), parts).ok());
  }
  for (int r = 0; r < m; ++r) {
    ASSERT_TRUE(
        dec.AddShard(ShardInfo::Parity(r, k, m), parity->shard(r), parity->shard_length()).ok());
  }
  auto rec = dec.Recover();
  ASSERT_TRUE(rec.ok()) << rec.status();
  ASSERT_EQ(rec->size(), 2u);
  for (const RecoveredShard& s : *rec) {
    std::vector<uint8_t> want(s.length, 0);
    std::copy(pn[s.index].begin(), pn[s.index].end(), want.begin());
    std::copy(frames[s.index].begin(), frames[s.index].end(), want.begin() + 8);
    EXPECT_EQ(std::vector<uint8_t>(s.bytes, s.bytes + s.length), want);
  }
}

TEST(BlockDecoderTest, ContradictoryShardsAreRejected) {
  FecCodec codec;
  ShardPool pool(256);
  BlockDecoder dec(&codec, &pool);
  std::vector<uint8_t> bytes(256, 1);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  dec.Begin(1);
  ASSERT_TRUE(dec.AddShard(ShardInfo::Data(6, 8, 2), bytes.data(), 100).ok());
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(0, 8, 3), bytes.data(), 10).code(), kInvalid);  // m
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(8, 8, 2), bytes.data(), 10).code(), kInvalid);  // idx
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(0, 8, 2), bytes.data(), 0).code(), kInvalid);   // len
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(0, 8, 2), bytes.data(), 257).code(), kInvalid);
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(2, 8, 2), bytes.data(), 128).code(), kInvalid);
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(0, 6, 2), bytes.data(), 128).code(),
            kInvalid);  // k <= idx 6
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(0, 9, 2), bytes.data(), 128).code(),
            kInvalid);  // k > tag
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(0, 7, 2), bytes.data(), 64).code(), kInvalid);  // < data
  // An exact (unpadded) repair length, as the transport sends it, is accepted.
  ASSERT_TRUE(dec.AddShard(ShardInfo::Parity(0, 7, 2), bytes.data(), 120).ok());
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(1, 8, 2), bytes.data(), 120).code(), kInvalid);  // k
  EXPECT_EQ(dec.AddShard(ShardInfo::Parity(1, 7, 2), bytes.data(), 128).code(), kInvalid);  // len
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(1, 8, 2), bytes.data(), 121).code(), kInvalid);    // > len
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(7, 8, 2), bytes.data(), 10).code(), kInvalid);     // >= k'
  EXPECT_TRUE(dec.AddShard(ShardInfo::Data(1, 8, 2), bytes.data(), 120).ok());
  EXPECT_EQ(dec.debug_state().k, 7);
  EXPECT_EQ(dec.debug_state().data_present, 2);
}

TEST(BlockDecoderTest, UnpaddedRepairShardsDecode) {
  // The transport sends repair shards cut to the longest data shard (parity past it is
  // zero); the decoder pads them back.
  FecCodec codec;
  ShardPool pool(512);
  BlockEncoder enc(&codec, &pool);
  ASSERT_TRUE(enc.Begin(3, 4, 2).ok());
  std::vector<std::vector<uint8_t>> data = {std::vector<uint8_t>(300, 0), std::vector<uint8_t>(77, 0),
                                            std::vector<uint8_t>(301, 0), std::vector<uint8_t>(5, 0)};
  for (size_t i = 0; i < data.size(); ++i) {
    for (size_t j = 0; j < data[i].size(); ++j) data[i][j] = static_cast<uint8_t>(i * 31 + j * 7 + 1);
    ASSERT_TRUE(enc.AddDataShard(static_cast<int>(i), data[i].data(), data[i].size()).ok());
  }
  absl::StatusOr<ParityShards> parity = enc.Finish(4);
  ASSERT_TRUE(parity.ok());
  ASSERT_EQ(parity->data_length(), 301u);
  ASSERT_EQ(parity->shard_length(), 320u);
  for (size_t b = 301; b < 320; ++b) {
    ASSERT_EQ(parity->shard(0)[b], 0) << "parity past the longest data shard must be zero";
    ASSERT_EQ(parity->shard(1)[b], 0);
  }
  BlockDecoder dec(&codec, &pool);
  dec.Begin(3);
  ASSERT_TRUE(dec.AddShard(ShardInfo::Data(1, 4, 2), data[1].data(), data[1].size()).ok());
  ASSERT_TRUE(dec.AddShard(ShardInfo::Data(3, 4, 2), data[3].data(), data[3].size()).ok());
  ASSERT_TRUE(dec.AddShard(ShardInfo::Parity(0, 4, 2), parity->shard(0), 301).ok());
  ASSERT_TRUE(dec.AddShard(ShardInfo::Parity(1, 4, 2), parity->shard(1), 301).ok());
  ASSERT_TRUE(dec.CanRecover());
  absl::StatusOr<std::span<const RecoveredShard>> rec = dec.Recover();
  ASSERT_TRUE(rec.ok());
  ASSERT_EQ(rec->size(), 2u);
  for (const RecoveredShard& r : *rec) {
    const auto& want = data[r.index];
    ASSERT_EQ(0, memcmp(r.bytes, want.data(), want.size())) << r.index;
    for (size_t b = want.size(); b < r.length; ++b) ASSERT_EQ(r.bytes[b], 0);
  }
}

TEST(BlockDecoderTest, PoolExhaustionIsAStatus) {
  FecCodec codec;
  ShardPool pool(128, /*max_buffers=*/2);
  BlockDecoder dec(&codec, &pool);
  std::vector<uint8_t> bytes(128, 1);
  dec.Begin(1);
  ASSERT_TRUE(dec.AddShard(ShardInfo::Data(0, 4, 2), bytes.data(), 128).ok());
  ASSERT_TRUE(dec.AddShard(ShardInfo::Data(1, 4, 2), bytes.data(), 128).ok());
  EXPECT_EQ(dec.AddShard(ShardInfo::Data(2, 4, 2), bytes.data(), 128).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(dec.debug_state().data_present, 2);
}

}  // namespace
}  // namespace longhaul::fec
