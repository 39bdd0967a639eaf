#include "transport/base/percentile.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

const std::vector<double> kOneToTen = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

TEST(PercentileTest, EmptyIsZero) {
  EXPECT_EQ(NearestRankPercentile({}, 0.5), 0);
  EXPECT_EQ(InterpolatedPercentile({}, 0.5), 0);
}

TEST(PercentileTest, OneSampleIsEveryPercentile) {
  const std::vector<double> one = {7.5};
  for (double q : {0.0, 0.01, 0.5, 0.999, 1.0}) {
    EXPECT_EQ(NearestRankPercentile(one, q), 7.5) << q;
    EXPECT_EQ(InterpolatedPercentile(one, q), 7.5) << q;
  }
}

TEST(PercentileTest, NearestRankReportsObservedSamples) {
  // {fraction, the sample it names}
  for (const auto& [q, want] : std::vector<std::pair<double, double>>{
           {0, 1}, {0.1, 1}, {0.11, 2}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}}) {
    EXPECT_EQ(NearestRankPercentile(kOneToTen, q), want) << q;
  }
  EXPECT_EQ(NearestRankIndex(4, 0.25), 0u);
  EXPECT_EQ(NearestRankIndex(4, 0.26), 1u);
  EXPECT_EQ(NearestRankIndex(1000, 0.999), 998u);
}

TEST(PercentileTest, InterpolatedLiesBetweenTheClosestRanks) {
  EXPECT_EQ(InterpolatedPercentile(kOneToTen, 0), 1);
  EXPECT_EQ(InterpolatedPercentile(kOneToTen, 1), 10);
  for (const auto& [q, want] :
       std::vector<std::pair<double, double>>{{0.25, 3.25}, {0.5, 5.5}, {0.99, 9.91}}) {
    EXPECT_DOUBLE_EQ(InterpolatedPercentile(kOneToTen, q), want) << q;
  }
  EXPECT_DOUBLE_EQ(InterpolatedPercentile(std::vector<double>{0, 100}, 0.3), 30);
}

TEST(PercentileTest, FractionsOutsideZeroToOneAreClamped) {
  EXPECT_EQ(NearestRankPercentile(kOneToTen, -0.5), 1);
  EXPECT_EQ(NearestRankPercentile(kOneToTen, 1.5), 10);
  EXPECT_EQ(InterpolatedPercentile(kOneToTen, -0.5), 1);
  EXPECT_EQ(InterpolatedPercentile(kOneToTen, 1.5), 10);
}

}  // namespace
}  // namespace longhaul
