#include "transport/fec/fec_codec.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/support/fec_shards.h"
#include "transport/base/rng.h"

namespace longhaul::fec {
namespace {

using testing::ForEachErasurePattern;
using testing::RandomPattern;
using testing::RandomShards;

// Encodes a random (k, m) block, then for each pattern erases the marked shards and
// checks that Reconstruct() rebuilds every erased data shard bit-exactly.
class RoundTrip {
 public:
  RoundTrip(FecCodec& codec, int k, int m, size_t len, uint64_t seed)
      : codec_(codec), k_(k), m_(m), len_(len) {
    Rng rng(seed);
    data_ = RandomShards(rng, k, len);
    parity_.assign(m, std::vector<uint8_t>(len));
    std::vector<const uint8_t*> d(k);
    std::vector<uint8_t*> p(m);
    for (int j = 0; j < k; ++j) d[j] = data_[j].data();
    for (int r = 0; r < m; ++r) p[r] = parity_[r].data();
    EXPECT_TRUE(codec_.Encode(k, m, len, d.data(), p.data()).ok());
    out_.assign(k, std::vector<uint8_t>(len));
  }

  // Returns the status of Reconstruct(); on success, checks the rebuilt shards.
  absl::Status Check(const std::vector<bool>& erased) {
    std::vector<const uint8_t*> shards(k_ + m_);
    std::vector<uint8_t*> out(k_, nullptr);
    for (int i = 0; i < k_ + m_; ++i) {
      if (erased[i]) {
        shards[i] = nullptr;
        if (i < k_) {
          std::memset(out_[i].data(), 0xEE, len_);
          out[i] = out_[i].data();
        }
      } else {
        shards[i] = i < k_ ? data_[i].data() : parity_[i - k_].data();
      }
    }
    absl::Status s = codec_.Reconstruct(k_, m_, len_, shards.data(), out.data());
    if (!s.ok()) return s;
    for (int j = 0; j < k_; ++j) {
      if (erased[j]) {
        EXPECT_EQ(out_[j], data_[j]) << "k=" << k_ << " m=" << m_ << " data shard " << j;
      }
    }
    return s;
  }

 private:
  FecCodec& codec_;
  int k_, m_;
  size_t len_;
  std::vector<std::vector<uint8_t>> data_, parity_, out_;
};

uint64_t Binomial(int n, int r) {
  uint64_t c = 1;
  for (int i = 1; i <= r; ++i) c = c * (n - r + i) / i;
  return c;
}

class ExhaustiveTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ExhaustiveTest, EveryPatternUpToMErasuresRecovers) {
  const auto [k, m] = GetParam();
  FecCodec codec;
  RoundTrip rt(codec, k, m, 128, 1000 + k);
  uint64_t failures = 0;
  const uint64_t visited = ForEachErasurePattern(k + m, m, [&](const std::vector<bool>& e) {
    if (!rt.Check(e).ok()) ++failures;
  });
  uint64_t expected = 0;
  for (int i = 0; i <= m; ++i) expected += Binomial(k + m, i);
  EXPECT_EQ(visited, expected);
  EXPECT_EQ(failures, 0u);
}

INSTANTIATE_TEST_SUITE_P(Geometries, ExhaustiveTest,
                         ::testing::Values(std::make_pair(1, 1), std::make_pair(1, 3),
                                           std::make_pair(4, 2), std::make_pair(8, 3),
                                           std::make_pair(16, 4), std::make_pair(10, 5)));

TEST(FecCodecTest, SampledPatternsForLargeBlocks) {
  Rng rng(99);
  for (auto [k, m] : {std::make_pair(32, 4), std::make_pair(32, 8), std::make_pair(64, 8),
                      std::make_pair(128, 16), std::make_pair(250, 5), std::make_pair(100, 40)}) {
    FecCodec codec;
    RoundTrip rt(codec, k, m, 192, 2000 + k + m);
    for (int trial = 0; trial < 300; ++trial) {
      const int e = 1 + static_cast<int>(rng.UniformInt(m));
      ASSERT_TRUE(rt.Check(RandomPattern(rng, k + m, e)).ok()) << "k=" << k << " m=" << m;
    }
    // The worst case: the first m data shards lost, all parity needed.
    std::vector<bool> worst(k + m, false);
    for (int j = 0; j < m && j < k; ++j) worst[j] = true;
    ASSERT_TRUE(rt.Check(worst).ok());
  }
}

TEST(FecCodecTest, MoreThanMErasuresFailCleanly) {
  FecCodec codec;
  Rng rng(5);
  for (auto [k, m] : {std::make_pair(4, 2), std::make_pair(8, 3), std::make_pair(32, 4)}) {
    RoundTrip rt(codec, k, m, 64, 3000 + k);
    for (int trial = 0; trial < 50; ++trial) {
      // More than m of the k + m shards erased: fewer than k remain, so more data
      // shards are lost than parity shards survive, whatever the mix.
      const int e = m + 1 + static_cast<int>(rng.UniformInt(k));
      const std::vector<bool> erased = RandomPattern(rng, k + m, std::min(e, k + m));
      int lost_data = 0, parity_left = 0;
      for (int i = 0; i < k + m; ++i) {
        if (i < k && erased[i]) ++lost_data;
        if (i >= k && !erased[i]) ++parity_left;
      }
      ASSERT_GT(lost_data, parity_left);
      const absl::Status s = rt.Check(erased);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    }
  }
}

TEST(FecCodecTest, ShortenedBlockIsPrefixOfFullCode) {
  // A (5, 3) block's parity equals the (8, 3) parity with data shards 5..7 zero.
  FecCodec codec;
  Rng rng(11);
  auto data = RandomShards(rng, 8, 256);
  for (int j = 5; j < 8; ++j) std::fill(data[j].begin(), data[j].end(), 0);
  std::vector<std::vector<uint8_t>> p_short(3, std::vector<uint8_t>(256));
  std::vector<std::vector<uint8_t>> p_full(3, std::vector<uint8_t>(256));
  std::vector<const uint8_t*> d(8);
  std::vector<uint8_t*> ps(3), pf(3);
  for (int j = 0; j < 8; ++j) d[j] = data[j].data();
  for (int r = 0; r < 3; ++r) {
    ps[r] = p_short[r].data();
    pf[r] = p_full[r].data();
  }
  ASSERT_TRUE(codec.Encode(5, 3, 256, d.data(), ps.data()).ok());
  ASSERT_TRUE(codec.Encode(8, 3, 256, d.data(), pf.data()).ok());
  EXPECT_EQ(p_short, p_full);
  // And a (5, 2) block's parity is the first two rows of (5, 3).
  std::vector<std::vector<uint8_t>> p_two(2, std::vector<uint8_t>(256));
  std::vector<uint8_t*> pt = {p_two[0].data(), p_two[1].data()};
  ASSERT_TRUE(codec.Encode(5, 2, 256, d.data(), pt.data()).ok());
  EXPECT_EQ(p_two[0], p_short[0]);
  EXPECT_EQ(p_two[1], p_short[1]);
}

TEST(FecCodecTest, RejectsBadArguments) {
  FecCodec codec;
  std::vector<uint8_t> buf(128);
  const uint8_t* d[1] = {buf.data()};
  uint8_t* p[1] = {buf.data()};
  EXPECT_EQ(codec.Encode(1, 1, 100, d, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.Encode(1, 1, 0, d, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.Encode(0, 1, 64, d, p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.Encode(200, 56, 64, d, p).code(), absl::StatusCode::kInvalidArgument);
  // A missing data shard without an output buffer.
  const uint8_t* shards[2] = {nullptr, buf.data()};
  uint8_t* out[1] = {nullptr};
  EXPECT_EQ(codec.Reconstruct(1, 1, 64, shards, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(codec.DecodeTables(8, std::vector<uint8_t>{}, std::vector<uint8_t>{}).ok());
}

TEST(FecCodecTest, DecodeTablesAreCachedPerPattern) {
  FecCodec codec;
  RoundTrip rt(codec, 16, 4, 64, 1);
  std::vector<bool> erased(20, false);
  erased[3] = erased[9] = true;
  ASSERT_TRUE(rt.Check(erased).ok());
  EXPECT_EQ(codec.stats().decode_misses, 1u);
  EXPECT_EQ(codec.stats().decode_hits, 0u);
  ASSERT_TRUE(rt.Check(erased).ok());
  ASSERT_TRUE(rt.Check(erased).ok());
  EXPECT_EQ(codec.stats().decode_misses, 1u);
  EXPECT_EQ(codec.stats().decode_hits, 2u);
  EXPECT_EQ(codec.stats().decode_cache_entries, 1u);
  // Same lost data, but parity 0 missing: other rows are used, another pattern.
  erased[16] = true;
  ASSERT_TRUE(rt.Check(erased).ok());
  EXPECT_EQ(codec.stats().decode_misses, 2u);
  // Encode tables were built once for (16, 4) and reused by nothing else.
  EXPECT_EQ(codec.stats().encode_table_builds, 1u);
  // A shared pointer from the cache is the same object on a hit.
  auto a = codec.DecodeTables(16, std::vector<uint8_t>{3, 9}, std::vector<uint8_t>{0, 1});
  auto b = codec.DecodeTables(16, std::vector<uint8_t>{3, 9}, std::vector<uint8_t>{0, 1});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
}

TEST(FecCodecTest, PrecomputedSingleErasuresAreHitWithoutBuilding) {
  FecCodec codec;
  ASSERT_TRUE(codec.PrecomputeSingleErasures(32, 4).ok());
  EXPECT_EQ(codec.stats().pinned_entries, 32u * 4u);
  ASSERT_TRUE(codec.PrecomputeSingleErasures(32, 4).ok());  // idempotent
  EXPECT_EQ(codec.stats().pinned_entries, 32u * 4u);
  RoundTrip rt(codec, 32, 4, 64, 2);
  for (int j = 0; j < 32; ++j) {
    std::vector<bool> erased(36, false);
    erased[j] = true;
    if (j % 2 == 1) erased[32] = true;  // parity 0 lost too: row 1 is used
    ASSERT_TRUE(rt.Check(erased).ok());
  }
  EXPECT_EQ(codec.stats().decode_pinned_hits, 32u);
  EXPECT_EQ(codec.stats().decode_misses, 0u);
}

TEST(FecCodecTest, PinnedBudgetIsEnforced) {
  FecCodecOptions options;
  options.pinned_cache_bytes = 1024;
  FecCodec codec(options);
  EXPECT_EQ(codec.PrecomputeSingleErasures(32, 4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(codec.stats().pinned_entries, 0u);
}

TEST(FecCodecTest, LruEvictsLeastRecentlyUsedWithinByteBudget) {
  FecCodecOptions options;
  // (k=8, e=1) tables are 256 bytes + 128 accounting: room for exactly three.
  options.decode_cache_bytes = 3 * (256 + 128);
  FecCodec codec(options);
  auto get = [&](uint8_t lost) {
    return codec.DecodeTables(8, std::vector<uint8_t>{lost}, std::vector<uint8_t>{0});
  };
  ASSERT_TRUE(get(0).ok());
  ASSERT_TRUE(get(1).ok());
  ASSERT_TRUE(get(2).ok());
  EXPECT_EQ(codec.stats().decode_evictions, 0u);
  ASSERT_TRUE(get(0).ok());  // hit; 1 is now least recent
  ASSERT_TRUE(get(3).ok());  // evicts 1
  EXPECT_EQ(codec.stats().decode_evictions, 1u);
  EXPECT_EQ(codec.stats().decode_cache_entries, 3u);
  EXPECT_LE(codec.stats().decode_cache_bytes, options.decode_cache_bytes);
  const uint64_t misses = codec.stats().decode_misses;
  ASSERT_TRUE(get(0).ok());
  ASSERT_TRUE(get(2).ok());
  EXPECT_EQ(codec.stats().decode_misses, misses);  // still cached
  ASSERT_TRUE(get(1).ok());
  EXPECT_EQ(codec.stats().decode_misses, misses + 1);  // was evicted
}

TEST(FecCodecTest, ManyErasuresAreBuiltUncached) {
  FecCodec codec;
  const int k = 40, m = 20;
  RoundTrip rt(codec, k, m, 64, 3);
  std::vector<bool> erased(k + m, false);
  for (int j = 0; j < kMaxCachedErasures + 1; ++j) erased[2 * j] = true;
  ASSERT_TRUE(rt.Check(erased).ok());
  ASSERT_TRUE(rt.Check(erased).ok());
  EXPECT_EQ(codec.stats().decode_uncacheable, 2u);
  EXPECT_EQ(codec.stats().decode_cache_entries, 0u);
}

}  // namespace
}  // namespace longhaul::fec
