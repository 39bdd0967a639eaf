#include "transport/base/units.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(DurationTest, ConstructorsAndAccessors) {
  EXPECT_EQ(Duration::Nanoseconds(5).ns(), 5);
  EXPECT_EQ(Duration::Microseconds(5).ns(), 5000);
  EXPECT_EQ(Duration::Milliseconds(58).ns(), 58000000);
  EXPECT_EQ(Duration::Seconds(1.5).ns(), 1500000000);
  EXPECT_EQ(Duration::Zero().ns(), 0);
  EXPECT_EQ(Duration().ns(), 0);
  EXPECT_DOUBLE_EQ(Duration::Milliseconds(58).seconds(), 0.058);
  EXPECT_DOUBLE_EQ(Duration::Milliseconds(58).milliseconds(), 58);
  EXPECT_DOUBLE_EQ(Duration::Milliseconds(58).microseconds(), 58000);
  EXPECT_TRUE(Duration::Infinite().IsInfinite());
  EXPECT_FALSE(Duration::Seconds(1e9).IsInfinite());
  EXPECT_EQ(Duration::Infinite().ns(), std::numeric_limits<int64_t>::max());
}

TEST(DurationTest, Arithmetic) {
  const Duration a = Duration::Milliseconds(10), b = Duration::Milliseconds(3);
  EXPECT_EQ((a + b).ns(), 13000000);
  EXPECT_EQ((a - b).ns(), 7000000);
  EXPECT_EQ((b - a).ns(), -7000000);
  EXPECT_EQ((a * 3).ns(), 30000000);
  EXPECT_EQ((a / 4).ns(), 2500000);
  EXPECT_EQ(a.Scaled(0.125).ns(), 1250000);
  Duration c = a;
  c += b;
  EXPECT_EQ(c, Duration::Milliseconds(13));
  c -= a;
  EXPECT_EQ(c, b);
  EXPECT_LT(b, a);
  EXPECT_GT(a, b);
  EXPECT_LE(a, a);
  EXPECT_NE(a, b);
  EXPECT_LT(a, Duration::Infinite());
}

TEST(DurationTest, ToString) {
  EXPECT_EQ(Duration::Nanoseconds(17).ToString(), "17ns");
  EXPECT_EQ(Duration::Microseconds(300).ToString(), "300us");
  EXPECT_EQ(Duration::Milliseconds(58).ToString(), "58ms");
  EXPECT_EQ(Duration::Seconds(2.5).ToString(), "2.5s");
  EXPECT_EQ(Duration::Nanoseconds(-5).ToString(), "-5ns");
  EXPECT_EQ(Duration::Milliseconds(-58).ToString(), "-58ms");
  EXPECT_EQ(Duration::Infinite().ToString(), "inf");
}

TEST(TimeTest, Arithmetic) {
  const Time t0 = Time::FromNanoseconds(1000);
  const Duration d = Duration::Microseconds(2);
  EXPECT_EQ((t0 + d).ns(), 3000);
  EXPECT_EQ((t0 - d).ns(), -1000);
  EXPECT_EQ((t0 + d) - t0, d);
  EXPECT_EQ(t0 - (t0 + d), Duration::Nanoseconds(-2000));
  Time t = t0;
  t += d;
  EXPECT_EQ(t, t0 + d);
  EXPECT_LT(t0, t);
  EXPECT_EQ(Time().ns(), 0);
  EXPECT_EQ(Time::Zero(), Time());
  EXPECT_DOUBLE_EQ(Time::FromNanoseconds(1500000000).seconds(), 1.5);
}

TEST(TimeTest, InfinityIsSticky) {
  // Adding to or adding an infinite value gives the infinite instant, never an overflow:
  // timer tables use Time::Infinite() for "no deadline".
  EXPECT_TRUE((Time::Infinite() + Duration::Seconds(1)).IsInfinite());
  EXPECT_TRUE((Time::FromNanoseconds(5) + Duration::Infinite()).IsInfinite());
  Time t = Time::FromNanoseconds(std::numeric_limits<int64_t>::max() - 10);
  EXPECT_FALSE(t.IsInfinite());
  Time inf = Time::Infinite();
  inf += Duration::Milliseconds(1);
  EXPECT_TRUE(inf.IsInfinite());
  EXPECT_LT(Time::FromNanoseconds(1) + Duration::Seconds(1e6), Time::Infinite());
}

TEST(BandwidthTest, ConstructorsAndConversions) {
  EXPECT_DOUBLE_EQ(Bandwidth::Gbps(100).bps(), 100e9);
  EXPECT_DOUBLE_EQ(Bandwidth::Mbps(800).bps(), 800e6);
  EXPECT_DOUBLE_EQ(Bandwidth::BitsPerSecond(8).BytesPerSecond(), 1);
  EXPECT_TRUE(Bandwidth::Zero().IsZero());
  EXPECT_TRUE(Bandwidth().IsZero());
  EXPECT_TRUE(Bandwidth::BitsPerSecond(-1).IsZero());
  EXPECT_FALSE(Bandwidth::BitsPerSecond(1).IsZero());
  EXPECT_DOUBLE_EQ(Bandwidth::Gbps(1).Scaled(1.25).bps(), 1.25e9);
  EXPECT_LT(Bandwidth::Mbps(1), Bandwidth::Gbps(1));
}

TEST(BandwidthTest, TransferTimeAndBytesIn) {
  const Bandwidth gig = Bandwidth::Gbps(1);
  EXPECT_EQ(gig.TransferTime(125000000).ns(), 1000000000);  // 1 Gbit in 1 s
  EXPECT_EQ(gig.TransferTime(1500).ns(), 12000);
  EXPECT_EQ(gig.TransferTime(0).ns(), 0);
  EXPECT_TRUE(Bandwidth::Zero().TransferTime(1).IsInfinite());
  EXPECT_EQ(gig.BytesIn(Duration::Seconds(1)), 125000000u);
  EXPECT_EQ(gig.BytesIn(Duration::Milliseconds(58)), 7250000u);
  // 100 Gbit/s x 58 ms = 725 MB in flight.
  EXPECT_EQ(Bandwidth::Gbps(100).BytesIn(Duration::Milliseconds(58)), 725000000u);
  EXPECT_EQ(Bandwidth::Zero().BytesIn(Duration::Seconds(1)), 0u);
}

TEST(BandwidthTest, FromBytesAndDuration) {
  EXPECT_DOUBLE_EQ(Bandwidth::FromBytesAndDuration(125000000, Duration::Seconds(1)).bps(), 1e9);
  EXPECT_TRUE(Bandwidth::FromBytesAndDuration(100, Duration::Zero()).IsZero());
  EXPECT_TRUE(Bandwidth::FromBytesAndDuration(100, Duration::Nanoseconds(-1)).IsZero());
  // Consistent with TransferTime.
  const Bandwidth b = Bandwidth::Gbps(40);
  EXPECT_DOUBLE_EQ(Bandwidth::FromBytesAndDuration(5000000, b.TransferTime(5000000)).bps(), 40e9);
}

TEST(BandwidthTest, ToString) {
  EXPECT_EQ(Bandwidth::Gbps(100).ToString(), "100gbit");
  EXPECT_EQ(Bandwidth::Gbps(2.5).ToString(), "2.5gbit");
  EXPECT_EQ(Bandwidth::Mbps(800).ToString(), "800mbit");
  EXPECT_EQ(Bandwidth::BitsPerSecond(5000).ToString(), "5kbit");
  EXPECT_EQ(Bandwidth::BitsPerSecond(12).ToString(), "12bit");
}

}  // namespace
}  // namespace longhaul
