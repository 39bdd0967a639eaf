#include "transport/core/cc/windowed_filter.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <utility>

#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul {
namespace {

TEST(WindowedFilterTest, EmptyUntilTheFirstSample) {
  MaxFilter<int> f(10);
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(f.Get(), 0);
  f.Update(5, 0);
  EXPECT_FALSE(f.empty());
  EXPECT_EQ(f.Get(), 5);
}

TEST(WindowedFilterTest, MaxKeepsTheBestSampleForAWindow) {
  MaxFilter<int> f(10);
  f.Update(100, 0);
  for (int t = 1; t <= 10; ++t) {
    f.Update(50, t);
    EXPECT_EQ(f.Get(), 100) << "t=" << t;
  }
  // The 100 is now more than a window old; the 50s from the window remain.
  f.Update(50, 11);
  EXPECT_EQ(f.Get(), 50);
}

// Feeds `samples` (value, time) to `f` in order; after each one with an expectation,
// checks the estimate.
struct Sample {
  int64_t value;
  int64_t t;
  std::optional<int64_t> want;  // the estimate after this sample; nullopt: not checked
};
template <typename T, typename Better>
void ExpectEstimates(WindowedFilter<T, Better>& f, std::initializer_list<Sample> samples) {
  for (const Sample& s : samples) {
    f.Update(static_cast<T>(s.value), s.t);
    if (s.want) {
      EXPECT_EQ(f.Get(), *s.want) << "after " << s.value << " at " << s.t;
    }
  }
}

TEST(WindowedFilterTest, ANewBestReplacesEverything) {
  MaxFilter<int> f(10);
  ExpectEstimates(f, {{10, 0, {}}, {30, 1, 30}, {20, 2, 30}});
}

TEST(WindowedFilterTest, FallsBackToTheSecondBestWhenTheBestExpires) {
  MaxFilter<int> f(8);
  ExpectEstimates(f, {{100, 0, {}},
                      {80, 3, {}},  // second best, in a later sub-window
                      {60, 6, {}},
                      {10, 9, 80},    // the 100 is 9 > 8 rounds old
                      {10, 12, 60}}); // the 80 is 9 rounds old
}

TEST(WindowedFilterTest, NothingInTheWindowRestartsFromTheSample) {
  MaxFilter<int> f(5);
  ExpectEstimates(f, {{100, 0, {}}, {7, 100, 7}});
}

TEST(WindowedFilterTest, MinFilterTracksTheMinimum) {
  MinFilter<int64_t> f(1000);
  ExpectEstimates(f, {{58, 0, {}},
                      {70, 100, 58},
                      {57, 200, 57},
                      {90, 1300, 90}});  // the 57 expired; 90 is all that is inside the window
}

TEST(WindowedFilterTest, ResetForgetsEarlierSamples) {
  MaxFilter<int> f(10);
  f.Update(100, 0);
  f.Reset(40, 1);
  EXPECT_EQ(f.Get(), 40);
  ExpectEstimates(f, {{30, 2, 40}});
}

// Against the exact windowed maximum on random data: the estimate is never above the
// true maximum of the last window + 1 samples' span and never below the true maximum of
// the current window's last quarter (the estimator's guarantee, loosely).
TEST(WindowedFilterTest, CloseToTheExactWindowedMaxOnRandomData) {
  constexpr int64_t kWindow = 40;
  MaxFilter<int> f(kWindow);
  Rng rng(7);
  std::deque<std::pair<int64_t, int>> exact;
  for (int64_t t = 0; t < 5000; ++t) {
    const int v = static_cast<int>(rng.UniformInt(1000));
    f.Update(v, t);
    exact.emplace_back(t, v);
    while (exact.front().first < t - kWindow) exact.pop_front();
    int window_max = 0, recent_max = 0;
    for (const auto& [ts, x] : exact) {
      window_max = std::max(window_max, x);
      if (ts >= t - kWindow / 4) recent_max = std::max(recent_max, x);
    }
    ASSERT_LE(f.Get(), window_max) << "t=" << t;
    ASSERT_GE(f.Get(), recent_max) << "t=" << t;
  }
}

}  // namespace
}  // namespace longhaul
