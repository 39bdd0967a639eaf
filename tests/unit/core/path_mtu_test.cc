// PathMtu: black-hole detection from paired timeout probes, binary search, raise timer.
#include "transport/core/send/path_mtu.h"

#include "gtest/gtest.h"

namespace longhaul {
namespace {

constexpr Time kT0 = Time::FromNanoseconds(1'000'000'000);

TEST(PathMtuTest, StartsAtTheMaximumWithNothingToProbe) {
  PathMtu m(9000);
  EXPECT_EQ(m.current(), 9000u);
  EXPECT_EQ(m.ProbeSize(kT0), 0u);
  EXPECT_FALSE(m.WantSmallProbe());
}

TEST(PathMtuTest, ASmallProbeAckedWithoutTheLargeOneBeforeItIsABlackHole) {
  PathMtu m(9000);
  m.OnProbeTimeout();
  ASSERT_TRUE(m.WantSmallProbe());
  m.OnTimeoutProbeSent(10, 9000);
  m.OnTimeoutProbeSent(11, PathMtu::kBaseDatagram);
  m.OnPacketAcked(11, PathMtu::kBaseDatagram);
  EXPECT_TRUE(m.OnAckDone(kT0));
  EXPECT_EQ(m.current(), PathMtu::kBaseDatagram);
  EXPECT_EQ(m.debug_state().black_holes, 1u);
  // The search starts at once, halfway.
  EXPECT_EQ(m.ProbeSize(kT0), PathMtu::kBaseDatagram + (9000 - PathMtu::kBaseDatagram) / 2);
}

TEST(PathMtuTest, BothProbesAckedIsNotABlackHole) {
  PathMtu m(9000);
  m.OnProbeTimeout();
  m.OnTimeoutProbeSent(10, 9000);
  m.OnTimeoutProbeSent(11, PathMtu::kBaseDatagram);
  m.OnPacketAcked(10, 9000);
  m.OnPacketAcked(11, PathMtu::kBaseDatagram);
  EXPECT_FALSE(m.OnAckDone(kT0));
  EXPECT_EQ(m.current(), 9000u);
  EXPECT_FALSE(m.WantSmallProbe());  // a large packet passed: the count restarts
}

TEST(PathMtuTest, WithoutATimeoutSmallAcksChangeNothing) {
  PathMtu m(9000);
  m.OnPacketAcked(5, 300);
  EXPECT_FALSE(m.OnAckDone(kT0));
  EXPECT_EQ(m.current(), 9000u);
}

TEST(PathMtuTest, SearchConvergesBelowThePathMtuAndRetriesTheMaximumLater) {
  PathMtu m(9000);
  m.OnProbeTimeout();
  m.OnTimeoutProbeSent(1, 9000);
  m.OnTimeoutProbeSent(2, 1200);
  m.OnPacketAcked(2, 1200);
  ASSERT_TRUE(m.OnAckDone(kT0));
  const ByteCount path = 1472;  // what passes
  Time now = kT0;
  PacketNumber pn = 100;
  for (int i = 0; i < 20 && m.ProbeSize(now) > 0; ++i) {
    const ByteCount size = m.ProbeSize(now);
    m.OnProbeSent(now, pn, size);
    EXPECT_EQ(m.ProbeSize(now), 0u);  // one at a time
    if (size <= path) {
      m.OnProbeAcked(now, pn);
    } else {
      m.OnProbeLost(now, pn);
    }
    ++pn;
    now = now + Duration::Milliseconds(60);
  }
  EXPECT_LE(m.current(), path);
  EXPECT_GT(m.current() + PathMtu::kSearchPrecision, path);
  // Settled: nothing to probe until the raise timer, then the maximum.
  EXPECT_EQ(m.ProbeSize(now), 0u);
  const Time later = now + PathMtu::kRaiseInterval;
  ASSERT_EQ(m.ProbeSize(later), 9000u);
  m.OnProbeSent(later, pn, 9000);
  EXPECT_TRUE(m.OnProbeAcked(later, pn));  // the path is back
  EXPECT_EQ(m.current(), 9000u);
  EXPECT_EQ(m.ProbeSize(later + PathMtu::kRaiseInterval * 2), 0u);
}

TEST(PathMtuTest, AnExternalLimitLowersAtOnceAndBoundsTheSearch) {
  PathMtu m(9000);
  m.OnExternalLimit(kT0, 4000);
  EXPECT_EQ(m.current(), 4000u);
  for (PacketNumber pn = 1; pn < 10; ++pn) {
    const ByteCount size = m.ProbeSize(kT0);
    if (size == 0) break;
    EXPECT_LE(size, 4000u);
    m.OnProbeSent(kT0, pn, size);
    m.OnProbeLost(kT0, pn);
  }
  EXPECT_EQ(m.current(), 4000u);
}

TEST(PathMtuTest, SetLimitLowersAndRaisesWithinTheConfiguredSize) {
  PathMtu m(9000);
  m.SetLimit(kT0, 2000);
  EXPECT_EQ(m.current(), 2000u);
  EXPECT_EQ(m.max(), 2000u);
  EXPECT_EQ(m.ProbeSize(kT0 + PathMtu::kRaiseInterval * 2), 0u);  // nothing to search
  // Below the base size too (a datapath of small frames): no small timeout probes then.
  m.SetLimit(kT0, 900);
  EXPECT_EQ(m.current(), 900u);
  m.OnProbeTimeout();
  EXPECT_FALSE(m.WantSmallProbe());
  // Raised again (a datapath that carries more came up), but never above the configured.
  m.SetLimit(kT0, 6000);
  EXPECT_EQ(m.current(), 6000u);
  m.SetLimit(kT0, 20000);
  EXPECT_EQ(m.current(), 9000u);
  EXPECT_EQ(m.max(), 9000u);
}

TEST(PathMtuTest, SetLimitRaisesOverAnExternalLimitAndStopsTheSearch) {
  PathMtu m(9000);
  m.OnExternalLimit(kT0, 1500);
  ASSERT_EQ(m.current(), 1500u);
  const ByteCount probe = m.ProbeSize(kT0 + PathMtu::kRaiseInterval);
  m.OnProbeSent(kT0, 7, probe > 0 ? probe : 1500);
  m.SetLimit(kT0, 4000);
  EXPECT_EQ(m.current(), 4000u);
  // The probe sent before no longer counts either way.
  EXPECT_FALSE(m.OnProbeAcked(kT0, 7));
  EXPECT_EQ(m.current(), 4000u);
  EXPECT_EQ(m.ProbeSize(kT0 + PathMtu::kRaiseInterval * 2), 0u);
}

TEST(PathMtuTest, AfterSetLimitASearchStaysAtOrUnderTheLimit) {
  PathMtu m(9000);
  m.SetLimit(kT0, 5000);
  // A black hole under the limit: the size falls, the search and its raise timer then
  // probe at most the limit.
  m.OnProbeTimeout();
  ASSERT_TRUE(m.WantSmallProbe());
  m.OnTimeoutProbeSent(1, 5000);
  m.OnTimeoutProbeSent(2, PathMtu::kBaseDatagram);
  m.OnPacketAcked(2, PathMtu::kBaseDatagram);
  ASSERT_TRUE(m.OnAckDone(kT0));
  Time now = kT0;
  PacketNumber pn = 100;
  for (int i = 0; i < 40; ++i) {
    now = now + PathMtu::kRaiseInterval;
    const ByteCount size = m.ProbeSize(now);
    if (size == 0) continue;
    EXPECT_LE(size, 5000u);
    m.OnProbeSent(now, pn, size);
    m.OnProbeAcked(now, pn++);  // everything passes: back up to the limit, not beyond
  }
  EXPECT_EQ(m.current(), 5000u);
  // An external limit still lowers it.
  m.OnExternalLimit(now, 3000);
  EXPECT_EQ(m.current(), 3000u);
}

}  // namespace
}  // namespace longhaul
