#include "transport/fec/loss_model.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul::fec {
namespace {

double Binomial(int n, int j, double p) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(j + 1.0) - std::lgamma(n - j + 1.0) +
                  j * std::log(p) + (n - j) * std::log1p(-p));
}

TEST(LossModelTest, FitRecoversLossRateAndBurst) {
  const GilbertModel g = GilbertModel::FromLossAndBurst(0.01, 8);
  EXPECT_NEAR(g.loss_rate(), 0.01, 1e-12);
  EXPECT_NEAR(g.mean_burst(), 8.0, 1e-12);
  const GilbertModel clean = GilbertModel::FromLossAndBurst(0.0, 5);
  EXPECT_EQ(clean.loss_rate(), 0.0);
  // Bursts shorter than one packet are raised to one; absurd loss is clamped.
  EXPECT_NEAR(GilbertModel::FromLossAndBurst(0.01, 0.2).mean_burst(), 1.0, 1e-12);
  EXPECT_NEAR(GilbertModel::FromLossAndBurst(0.9, 1).loss_rate(), 0.5, 1e-12);
}

TEST(LossModelTest, BernoulliMatchesBinomial) {
  for (double p : {1e-3, 1e-2, 0.1}) {
    const GilbertModel g = GilbertModel::Bernoulli(p);
    const int n = 36, cap = 10;
    const std::vector<double> dist = LossCountDistribution(g, n, cap);
    ASSERT_EQ(dist.size(), static_cast<size_t>(cap + 2));
    double tail = 0;
    for (int j = cap + 1; j <= n; ++j) tail += Binomial(n, j, p);
    for (int j = 0; j <= cap; ++j) EXPECT_NEAR(dist[j], Binomial(n, j, p), 1e-12 + 1e-9 * dist[j]);
    EXPECT_NEAR(dist.back(), tail, 1e-15 + 1e-6 * tail);
    // The GE fit with mean burst 1/(1-p) is the same chain.
    const GilbertModel fit = GilbertModel::FromLossAndBurst(p, 1.0 / (1.0 - p));
    EXPECT_NEAR(ProbMoreThan(fit, n, 3), ProbMoreThan(g, n, 3), 1e-12);
  }
}

TEST(LossModelTest, DistributionSumsToOneAndTailIsAccurate) {
  const GilbertModel g = GilbertModel::FromLossAndBurst(1e-4, 1);
  const std::vector<double> dist = LossCountDistribution(g, 40, 6);
  EXPECT_NEAR(std::accumulate(dist.begin(), dist.end(), 0.0), 1.0, 1e-12);
  // P(> 6 of 40) at p = 1e-4 is ~1e-21: a 1 - sum would return 0 or noise.
  EXPECT_GT(dist.back(), 1e-24);
  EXPECT_LT(dist.back(), 1e-18);
}

TEST(LossModelTest, SubsamplingKeepsLossRateAndShortensBursts) {
  const GilbertModel g = GilbertModel::FromLossAndBurst(1e-3, 8);
  const GilbertModel one = g.Subsampled(1);
  EXPECT_DOUBLE_EQ(one.q, g.q);
  EXPECT_DOUBLE_EQ(one.r, g.r);
  double prev_burst = g.mean_burst();
  for (uint32_t d : {2u, 4u, 8u, 16u, 64u}) {
    const GilbertModel s = g.Subsampled(d);
    EXPECT_NEAR(s.loss_rate(), 1e-3, 1e-12) << d;
    EXPECT_LT(s.mean_burst(), prev_burst) << d;
    prev_burst = s.mean_burst();
  }
  // Far apart, observations are independent: Bernoulli (mean run 1/(1-p)).
  EXPECT_NEAR(g.Subsampled(1000).mean_burst(), 1.0 / (1.0 - 1e-3), 1e-9);
  // The D-step chain equals the D-th power of the one-step transition matrix.
  const GilbertModel s3 = g.Subsampled(3);
  double gg = 1 - g.q, gb = g.q, bg = g.r, bb = 1 - g.r;
  double pg = gg, pb = gb, qg = bg, qb = bb;  // rows of T^1
  for (int i = 1; i < 3; ++i) {
    const double npg = pg * gg + pb * bg, npb = pg * gb + pb * bb;
    const double nqg = qg * gg + qb * bg, nqb = qg * gb + qb * bb;
    pg = npg, pb = npb, qg = nqg, qb = nqb;
  }
  EXPECT_NEAR(s3.q, pb, 1e-15);
  EXPECT_NEAR(s3.r, qg, 1e-15);
}

TEST(LossModelTest, BurstsMakeMultiLossBlocksLikelier) {
  // Same loss rate: bursty loss puts several losses in one block far more often.
  const double bern = ProbMoreThan(GilbertModel::Bernoulli(1e-3), 36, 2);
  const double burst = ProbMoreThan(GilbertModel::FromLossAndBurst(1e-3, 8), 36, 2);
  EXPECT_GT(burst, 100 * bern);
}

TEST(LossModelTest, BlockFailureByParityMatchesProbMoreThan) {
  const GilbertModel g = GilbertModel::FromLossAndBurst(0.02, 3).Subsampled(4);
  const std::vector<double> tail = BlockFailureByParity(g, 32, 8);
  ASSERT_EQ(tail.size(), 9u);
  for (int m = 0; m <= 8; ++m) {
    EXPECT_NEAR(tail[m], ProbMoreThan(g, 32 + m, m), 1e-15 + 1e-9 * tail[m]) << m;
    if (m > 0) {
      EXPECT_LT(tail[m], tail[m - 1]);
    }
  }
}

TEST(LossModelTest, MatchesMonteCarloOfInterleavedGilbertChain) {
  // Simulate the per-packet chain, take every D-th packet as a block's shards, and
  // compare the block failure frequency with the model's D-step chain.
  const double p = 0.01, b = 8;
  const uint32_t d = 4;
  const int n = 36, m = 2;
  const GilbertModel g = GilbertModel::FromLossAndBurst(p, b);
  Rng rng(2024);
  bool bad = rng.Uniform() < p;
  const int blocks = 60000;
  int failures = 0;
  for (int blk = 0; blk < blocks; ++blk) {
    int lost = 0;
    for (int i = 0; i < n; ++i) {
      for (uint32_t step = 0; step < d; ++step) {
        if (step == 0) lost += bad;
        bad = bad ? !(rng.Uniform() < g.r) : (rng.Uniform() < g.q);
      }
    }
    failures += lost > m;
  }
  const double sim = static_cast<double>(failures) / blocks;
  const double model = ProbMoreThan(g.Subsampled(d), n, m);
  // Blocks are consecutive pieces of one chain (weakly correlated); allow 5 sigma.
  const double sigma = std::sqrt(model * (1 - model) / blocks);
  EXPECT_NEAR(sim, model, 5 * sigma + 1e-4) << "sim " << sim << " model " << model;
  EXPECT_GT(model, 1e-3);  // the check is meaningful
}

TEST(LossModelTest, ProbAnyLoss) {
  EXPECT_EQ(ProbAnyLoss(GilbertModel::Bernoulli(0), 1000), 0.0);
  EXPECT_NEAR(ProbAnyLoss(GilbertModel::Bernoulli(1e-3), 1000), 1 - std::pow(1 - 1e-3, 1000),
              1e-12);
  // Bursty loss of the same rate: fewer, longer loss events, so a clean run is likelier.
  EXPECT_LT(ProbAnyLoss(GilbertModel::FromLossAndBurst(1e-3, 8), 1000),
            ProbAnyLoss(GilbertModel::Bernoulli(1e-3), 1000));
}

}  // namespace
}  // namespace longhaul::fec
