#include "transport/fec/block_encoder.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fec_shards.h"
#include "transport/base/rng.h"

namespace longhaul::fec {
namespace {

// Data shards of random lengths in [1, max_len] (many not multiples of 64).
std::vector<std::vector<uint8_t>> VariableShards(Rng& rng, int count, size_t max_len) {
  std::vector<std::vector<uint8_t>> shards(count);
  for (auto& s : shards) {
    s.resize(1 + rng.UniformInt(max_len));
    for (auto& b : s) b = static_cast<uint8_t>(rng.Next());
  }
  return shards;
}

// One-shot reference: zero-pad every shard to `len` and encode (k, m) with FecCodec.
std::vector<std::vector<uint8_t>> ReferenceParity(FecCodec& codec, int k, int m, size_t len,
                                                  const std::vector<std::vector<uint8_t>>& data) {
  std::vector<std::vector<uint8_t>> padded(k, std::vector<uint8_t>(len, 0));
  for (int j = 0; j < k; ++j) std::copy(data[j].begin(), data[j].end(), padded[j].begin());
  std::vector<std::vector<uint8_t>> parity(m, std::vector<uint8_t>(len));
  std::vector<const uint8_t*> d(k);
  std::vector<uint8_t*> p(m);
  for (int j = 0; j < k; ++j) d[j] = padded[j].data();
  for (int r = 0; r < m; ++r) p[r] = parity[r].data();
  EXPECT_TRUE(codec.Encode(k, m, len, d.data(), p.data()).ok());
  return parity;
}

std::vector<std::vector<uint8_t>> Copy(const ParityShards& ps) {
  std::vector<std::vector<uint8_t>> out;
  for (int r = 0; r < ps.m(); ++r) {
    out.emplace_back(ps.shard(r), ps.shard(r) + ps.shard_length());
  }
  return out;
}

TEST(BlockEncoderTest, IncrementalEqualsOneShotForAnyOrderAndLengths) {
  FecCodec codec;
  ShardPool pool(1024);
  BlockEncoder enc(&codec, &pool);
  Rng rng(21);
  for (auto [k, m] : {std::make_pair(1, 1), std::make_pair(4, 2), std::make_pair(8, 3),
                      std::make_pair(32, 4), std::make_pair(32, 8), std::make_pair(64, 12)}) {
    for (int trial = 0; trial < 5; ++trial) {
      auto data = VariableShards(rng, k, 1000);
      std::vector<int> order(k);
      std::iota(order.begin(), order.end(), 0);
      if (trial > 0) {
        for (int i = k - 1; i > 0; --i) std::swap(order[i], order[rng.UniformInt(i + 1)]);
      }
      ASSERT_TRUE(enc.Begin(7, k, m).ok());
      size_t longest = 0;
      for (int j : order) {
        ASSERT_TRUE(enc.AddDataShard(j, data[j].data(), data[j].size()).ok());
        longest = std::max(longest, data[j].size());
      }
      auto parity = enc.Finish(k);
      ASSERT_TRUE(parity.ok()) << parity.status();
      EXPECT_EQ(parity->block_id(), 7u);
      EXPECT_EQ(parity->k(), k);
      EXPECT_EQ(parity->m(), m);
      EXPECT_EQ(parity->shard_length(), RoundUpToShardAlignment(longest));
      EXPECT_EQ(Copy(*parity), ReferenceParity(codec, k, m, parity->shard_length(), data))
          << "k=" << k << " m=" << m << " trial " << trial;
      EXPECT_FALSE(enc.open());
    }
  }
}

TEST(BlockEncoderTest, ShortenedBlockEqualsSmallerCode) {
  FecCodec codec;
  ShardPool pool(512);
  BlockEncoder enc(&codec, &pool);
  Rng rng(3);
  for (int k_actual : {1, 5, 31}) {
    auto data = VariableShards(rng, k_actual, 512);
    ASSERT_TRUE(enc.Begin(1, 32, 4).ok());
    for (int j = 0; j < k_actual; ++j) {
      ASSERT_TRUE(enc.AddDataShard(j, data[j].data(), data[j].size()).ok());
    }
    auto parity = enc.Finish(k_actual);
    ASSERT_TRUE(parity.ok()) << parity.status();
    EXPECT_EQ(parity->k(), k_actual);
    EXPECT_EQ(Copy(*parity), ReferenceParity(codec, k_actual, 4, parity->shard_length(), data));
  }
}

// Splits `shard` into pieces at random cut points (some empty, some tiny).
std::vector<std::span<const uint8_t>> RandomPieces(Rng& rng, const std::vector<uint8_t>& shard) {
  std::vector<std::span<const uint8_t>> parts;
  size_t pos = 0;
  while (pos < shard.size()) {
    const uint64_t kind = rng.UniformInt(4);
    size_t n = kind == 0 ? 0 : kind == 1 ? 1 + rng.UniformInt(8) : 1 + rng.UniformInt(300);
    n = std::min(n, shard.size() - pos);
    parts.emplace_back(shard.data() + pos, n);
    pos += n;
  }
  return parts;
}

TEST(BlockEncoderTest, PiecewiseShardsEqualContiguousShards) {
  FecCodec codec;
  ShardPool pool(2048);
  BlockEncoder whole(&codec, &pool), pieces(&codec, &pool);
  Rng rng(77);
  for (int trial = 0; trial < 20; ++trial) {
    const int k = 1 + static_cast<int>(rng.UniformInt(20));
    const int m = 1 + static_cast<int>(rng.UniformInt(6));
    auto data = VariableShards(rng, k, 2048);
    ASSERT_TRUE(whole.Begin(trial, k, m).ok());
    ASSERT_TRUE(pieces.Begin(trial, k, m).ok());
    for (int j = 0; j < k; ++j) {
      ASSERT_TRUE(whole.AddDataShard(j, data[j].data(), data[j].size()).ok());
      const auto parts = RandomPieces(rng, data[j]);
      ASSERT_TRUE(pieces.AddDataShardParts(j, parts).ok());
    }
    auto a = whole.Finish(k);
    auto b = pieces.Finish(k);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->shard_length(), b->shard_length());
    EXPECT_EQ(Copy(*a), Copy(*b)) << "trial " << trial;
  }
}

TEST(BlockEncoderTest, RejectsMisuse) {
  FecCodec codec;
  ShardPool pool(256);
  BlockEncoder enc(&codec, &pool);
  std::vector<uint8_t> shard(300, 1);
  EXPECT_EQ(enc.AddDataShard(0, shard.data(), 10).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(enc.Finish(1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(enc.Begin(0, 0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.Begin(0, 250, 6).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(enc.Begin(0, 4, 2).ok());
  EXPECT_EQ(enc.Begin(1, 4, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(enc.AddDataShard(4, shard.data(), 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.AddDataShard(-1, shard.data(), 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.AddDataShard(0, shard.data(), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.AddDataShard(0, shard.data(), 257).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(enc.AddDataShard(0, shard.data(), 256).ok());
  EXPECT_EQ(enc.AddDataShard(0, shard.data(), 10).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(enc.AddDataShard(2, shard.data(), 10).ok());
  // Two shards added, but not 0..1: cannot close with 2; cannot close with 3 or 0.
  EXPECT_EQ(enc.Finish(2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.Finish(3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc.Finish(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(enc.open());  // errors leave the block open
  ASSERT_TRUE(enc.AddDataShard(1, shard.data(), 10).ok());
  EXPECT_TRUE(enc.Finish(3).ok());
}

TEST(BlockEncoderTest, PoolBuffersAreRecycled) {
  FecCodec codec;
  ShardPool pool(8192);
  BlockEncoder enc(&codec, &pool);
  std::vector<uint8_t> shard(8192, 7);
  size_t allocated_after_warmup = 0;
  for (int block = 0; block < 200; ++block) {
    ASSERT_TRUE(enc.Begin(block, 8, 4).ok());
    for (int j = 0; j < 8; ++j) ASSERT_TRUE(enc.AddDataShard(j, shard.data(), shard.size()).ok());
    auto parity = enc.Finish(8);
    ASSERT_TRUE(parity.ok());
    if (block == 0) allocated_after_warmup = pool.allocated();
    EXPECT_EQ(pool.outstanding(), 4u);
  }  // each ParityShards returns its buffers here
  EXPECT_EQ(pool.allocated(), allocated_after_warmup);
  EXPECT_EQ(pool.outstanding(), 0u);
  // Abandon returns buffers too.
  ASSERT_TRUE(enc.Begin(0, 8, 4).ok());
  EXPECT_EQ(pool.outstanding(), 4u);
  enc.Abandon();
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST(BlockEncoderTest, PoolExhaustionIsAStatus) {
  FecCodec codec;
  ShardPool pool(64, /*max_buffers=*/3);
  BlockEncoder enc(&codec, &pool);
  EXPECT_EQ(enc.Begin(0, 4, 4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_TRUE(enc.Begin(0, 4, 3).ok());
}

}  // namespace
}  // namespace longhaul::fec
