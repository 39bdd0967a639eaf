#include "transport/base/clock.h"

#include <chrono>
#include <cstdint>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

int64_t ChronoNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
int64_t ChronoNs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Each clock is the one its name says: a reading falls between two readings of the
// std::chrono clock on the same kernel clock.
TEST(ClockTest, MonotonicNsIsTheSteadyClock) {
  const int64_t before = ChronoNs(std::chrono::steady_clock::now());
  const int64_t t = MonotonicNs();
  const int64_t after = ChronoNs(std::chrono::steady_clock::now());
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);
}

TEST(ClockTest, RealtimeNsIsTheSystemClock) {
  const int64_t before = ChronoNs(std::chrono::system_clock::now());
  const int64_t t = RealtimeNs();
  const int64_t after = ChronoNs(std::chrono::system_clock::now());
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);
}

TEST(ClockTest, MonotonicNsNeverGoesBack) {
  int64_t last = MonotonicNs();
  for (int i = 0; i < 1000; ++i) {
    const int64_t now = MonotonicNs();
    ASSERT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace longhaul
