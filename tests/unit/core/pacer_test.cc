// Pacer driven with synthetic send times and rates: spacing with the header overhead,
// picosecond accounting, bounded catch-up and no credit after idle.
#include "transport/core/send/pacer.h"

#include "gtest/gtest.h"

namespace longhaul {
namespace {

constexpr Duration kBurst = Duration::Milliseconds(1);

TEST(PacerTest, FirstPacketMayLeaveAtOnce) {
  Pacer p(kBurst);
  EXPECT_EQ(p.ReleaseTime(), Time::Zero());
  EXPECT_TRUE(p.CanSend(Time::Zero()));
  EXPECT_TRUE(p.debug_state().idle);
}

TEST(PacerTest, SpacingCountsTheIpAndUdpHeaders) {
  Pacer p(kBurst);
  const Time t0 = Time::Zero() + Duration::Milliseconds(10);
  // 972 + 28 bytes = 8000 bits at 8 Gbit/s: exactly 1 us.
  p.OnPacketSent(t0, 972, Bandwidth::Gbps(8));
  EXPECT_EQ(p.ReleaseTime(), t0 + Duration::Microseconds(1));
  EXPECT_FALSE(p.CanSend(t0 + Duration::Nanoseconds(999)));
  EXPECT_TRUE(p.CanSend(t0 + Duration::Microseconds(1)));
  EXPECT_FALSE(p.debug_state().idle);
}

TEST(PacerTest, SubNanosecondSpacingDoesNotDrift) {
  Pacer p(kBurst);
  // 1500 + 28 bytes at 30 Gbit/s: 407.4666... ns per packet. Rounding each to a
  // nanosecond would drift by 0.47 ms over a million packets.
  const Time t0 = Time::Zero() + Duration::Milliseconds(1);
  Time now = t0;
  constexpr int kPackets = 1000000;
  for (int i = 0; i < kPackets; ++i) {
    ASSERT_TRUE(p.CanSend(now));
    p.OnPacketSent(now, 1500, Bandwidth::Gbps(30));
    now = p.ReleaseTime();
  }
  // Exact: 407466666666 ps after t0. Each step truncates below a picosecond, so the
  // schedule is at most 1 ps per packet early (1 us here), never 0.47 ms.
  const int64_t exact_ps = t0.ns() * 1000 + int64_t{kPackets} * 1528 * 8 * 1000 / 30;
  const int64_t got_ps = p.debug_state().release_time_ps;
  EXPECT_LE(got_ps, exact_ps);
  EXPECT_GE(got_ps, exact_ps - kPackets);
  EXPECT_EQ(p.ReleaseTime().ns(), (p.debug_state().release_time_ps + 999) / 1000);
}

TEST(PacerTest, LateWakeupGetsAtMostTheBurstOfCatchUp) {
  Pacer p(kBurst);
  const Bandwidth rate = Bandwidth::Gbps(8);  // 1 us per 1000-byte wire packet
  const Time t0 = Time::Zero() + Duration::Milliseconds(5);
  p.OnPacketSent(t0, 972, rate);
  // The sender (still busy) wakes 10 ms late: the release time is pulled up to lag now
  // by the burst, so about 1 ms of packets may leave back to back, then pacing resumes.
  const Time late = t0 + Duration::Milliseconds(10);
  int burst = 0;
  while (p.CanSend(late) && burst < 100000) {
    p.OnPacketSent(late, 972, rate);
    ++burst;
  }
  EXPECT_EQ(burst, 1001);  // 1 ms of 1 us slots, plus the slot at now itself
  EXPECT_EQ(p.ReleaseTime(), late + Duration::Microseconds(1));
}

TEST(PacerTest, NoCreditAfterIdle) {
  Pacer p(kBurst);
  const Bandwidth rate = Bandwidth::Gbps(8);
  const Time t0 = Time::Zero() + Duration::Milliseconds(5);
  p.OnPacketSent(t0, 972, rate);
  p.OnIdle();
  EXPECT_TRUE(p.debug_state().idle);
  // After an idle spell the first packet restarts pacing at now: exactly one may leave.
  const Time later = t0 + Duration::Milliseconds(10);
  ASSERT_TRUE(p.CanSend(later));
  p.OnPacketSent(later, 972, rate);
  EXPECT_FALSE(p.CanSend(later));
  EXPECT_EQ(p.ReleaseTime(), later + Duration::Microseconds(1));
}

TEST(PacerTest, IdleDoesNotReleaseEarlierThanScheduled) {
  Pacer p(kBurst);
  const Time t0 = Time::Zero() + Duration::Milliseconds(5);
  p.OnPacketSent(t0, 972, Bandwidth::Mbps(8));  // 1 ms
  p.OnIdle();
  // A packet sent (say, a probe, which ignores pacing) before the release time keeps
  // the schedule: idle only forgoes credit, it never moves the release time back.
  p.OnPacketSent(t0 + Duration::Microseconds(10), 972, Bandwidth::Mbps(8));
  EXPECT_EQ(p.ReleaseTime(), t0 + Duration::Milliseconds(2));
}

TEST(PacerTest, ZeroRateDoesNotAdvance) {
  Pacer p(kBurst);
  const Time t0 = Time::Zero() + Duration::Milliseconds(5);
  p.OnPacketSent(t0, 972, Bandwidth::Zero());
  EXPECT_EQ(p.ReleaseTime(), t0);
  EXPECT_TRUE(p.CanSend(t0));
}

TEST(PacerTest, ZeroBurstMeansNoCatchUp) {
  Pacer p(Duration::Zero());
  const Bandwidth rate = Bandwidth::Gbps(8);
  const Time t0 = Time::Zero() + Duration::Milliseconds(5);
  p.OnPacketSent(t0, 972, rate);
  const Time late = t0 + Duration::Milliseconds(1);
  ASSERT_TRUE(p.CanSend(late));
  p.OnPacketSent(late, 972, rate);
  EXPECT_FALSE(p.CanSend(late));
}

}  // namespace
}  // namespace longhaul
