#include "transport/emu/loop_util.h"

#include <limits>

#include "gtest/gtest.h"

namespace longhaul::emu {
namespace {

TEST(LoopUtilTest, LongWaitsWakeEarlyInStagesAndShortOnesAtTheDeadline) {
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(WakeTarget(kNever, 0), kNever);
  EXPECT_EQ(WakeTarget(29'000'000, 0), 28'000'000);
  EXPECT_EQ(WakeTarget(29'000'000, 28'000'000), 28'900'000);
  EXPECT_EQ(WakeTarget(29'000'000, 28'900'000), 29'000'000);
  EXPECT_EQ(WakeTarget(100, 200), 100);  // already due
  // Converges: repeated wakes reach the deadline in at most three steps.
  int64_t now = 0, steps = 0;
  while (now < 58'000'000) {
    now = WakeTarget(58'000'000, now);
    ++steps;
  }
  EXPECT_LE(steps, 3);
}

TEST(LoopUtilTest, StopSignalIsLevelAndSurvivesRepeatedRaises) {
  absl::StatusOr<StopSignal> s = StopSignal::Create();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Raised());
  s->Raise();
  s->Raise();
  EXPECT_TRUE(s->Raised());
  EXPECT_TRUE(s->Raised());
}

TEST(LoopUtilTest, EpollWaitUntilAPastDeadlineReturnsAtOnce) {
  int ep = epoll_create1(0);
  ASSERT_GE(ep, 0);
  epoll_event ev[1];
  EXPECT_EQ(EpollWaitUntil(ep, ev, 1, MonotonicNs() - 1000), 0);
  close(ep);
}

}  // namespace
}  // namespace longhaul::emu
