#include "transport/base/rng.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(RngTest, SameSeedSameSequence) {
  Rng a(12345), b(12345);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Next(), b.Next()) << i;
}

TEST(RngTest, DifferentSeedsDiffer) {
  Rng a(1), b(2);
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.Next() == b.Next();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, ReseedRestartsTheSequence) {
  Rng a(99);
  std::vector<uint64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(a.Next());
  a.Seed(99);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.Next(), first[i]);
}

TEST(RngTest, DefaultSeedIsOne) {
  Rng a, b(1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(RngTest, KnownSequenceIsStable) {
  // Golden values: simulator scenarios and tests replay from seeds, so the generator's
  // output must not change silently. Recompute deliberately if the algorithm changes.
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xE220A8397B1DCDAFULL);  // reference splitmix64 from 0
  EXPECT_EQ(SplitMix64(state), 0x6E789E6AA1B965F4ULL);
  Rng r(0);
  const uint64_t first = r.Next();
  Rng r2(0);
  EXPECT_EQ(r2.Next(), first);
}

TEST(RngTest, ForkIsDeterministicAndIndependent) {
  Rng a(7), b(7);
  Rng fa = a.Fork(), fb = b.Fork();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(fa.Next(), fb.Next());
  // The fork does not replay its parent.
  Rng parent(7);
  Rng child = parent.Fork();
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += parent.Next() == child.Next();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, UniformIsInUnitIntervalWithPlausibleMoments) {
  Rng r(2024);
  const int n = 200000;
  double sum = 0, sum_sq = 0, lo = 1, hi = 0;
  for (int i = 0; i < n; ++i) {
    double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Mean 1/2 (sd of the estimate ~0.00065), variance 1/12.
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  EXPECT_LT(lo, 1e-3);
  EXPECT_GT(hi, 1 - 1e-3);
}

TEST(RngTest, UniformIntStaysInRangeAndCoversBucketsEvenly) {
  Rng r(31337);
  for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{1000}, ~uint64_t{0}}) {
    for (int i = 0; i < 10000; ++i) ASSERT_LT(r.UniformInt(n), n) << n;
  }
  // Chi-square over 10 buckets, 100000 draws: 9 degrees of freedom, the 99.99th
  // percentile is about 33.7.
  const int kBuckets = 10, kDraws = 100000;
  std::vector<int> count(kBuckets, 0);
  for (int i = 0; i < kDraws; ++i) ++count[r.UniformInt(kBuckets)];
  double chi2 = 0;
  const double expected = static_cast<double>(kDraws) / kBuckets;
  for (int c : count) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 33.7);
}

TEST(RngTest, BernoulliMatchesProbability) {
  Rng r(5);
  EXPECT_FALSE(r.Bernoulli(0));
  EXPECT_FALSE(r.Bernoulli(-1));
  int always = 0;
  for (int i = 0; i < 1000; ++i) always += r.Bernoulli(1.0);
  EXPECT_EQ(always, 1000);
  const int n = 100000;
  int hits = 0;
  for (int i = 0; i < n; ++i) hits += r.Bernoulli(0.01);
  // Binomial(1e5, 0.01): mean 1000, sd ~31.5; allow 5 sd.
  EXPECT_NEAR(hits, 1000, 160);
}

}  // namespace
}  // namespace longhaul
