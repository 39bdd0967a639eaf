#include "transport/base/clock.h"

#include <chrono>
#include <cstdint>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

// Expects a reading of `read` to fall between two readings of the std::chrono clock
// `ChronoClock`, in nanoseconds since its epoch.
template <typename ChronoClock>
void ExpectBetweenReadingsOf(int64_t (*read)()) {
  auto ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               ChronoClock::now().time_since_epoch())
        .count();
  };
  const int64_t before = ns();
  const int64_t t = read();
  const int64_t after = ns();
  EXPECT_LE(before, t);
  EXPECT_LE(t, after);
}

// Each clock is the one its name says: a reading falls between two readings of the
// std::chrono clock on the same kernel clock.
TEST(ClockTest, MonotonicNsIsTheSteadyClock) {
  ExpectBetweenReadingsOf<std::chrono::steady_clock>(MonotonicNs);
}

TEST(ClockTest, RealtimeNsIsTheSystemClock) {
  ExpectBetweenReadingsOf<std::chrono::system_clock>(RealtimeNs);
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
