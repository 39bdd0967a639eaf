// Fault scenarios in the simulator (docs/reliability.md): each asserts that whatever
// completed is intact and that a failure is a clear error, never a hang (every run is
// bounded in virtual and wall time). Times are virtual; bands come from the link.
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "transport/base/clock.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kMiB = ByteCount{1} << 20;
constexpr double kRate = 500e6;     // bits/s
constexpr double kRttS = 0.058;

ScenarioOptions Options(CongestionControl cc, ByteCount bytes) {
  ScenarioOptions o;
  absl::StatusOr<LinkSpec> spec = ParseLinkSpec("rate=500mbit,rtt=58ms", {});
  EXPECT_TRUE(spec.ok()) << spec.status();
  o.link = *spec;
  o.sender_config.cc = cc;
  o.sender_config.rate = cc == CongestionControl::kFixed ? o.link.rate : Bandwidth();
  o.sender_config.segment = TransportConfig::SegmentForMtu(o.link.mtu);
  o.sender_config.window = 64 * kMiB;
  o.receiver_config = o.sender_config;
  o.bytes = bytes;
  o.max_virtual_time = Duration::Seconds(120);
  o.max_wall_time = Duration::Seconds(300);
  o.wall_seconds = MonotonicSeconds;  // the wall-time bound
  return o;
}

LinkSchedule Schedule(const std::string& text) {
  absl::StatusOr<LinkSchedule> s = ParseLinkSchedule(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : LinkSchedule{};
}

ScenarioResult RunSim(const ScenarioOptions& o) {
  absl::StatusOr<ScenarioResult> r = RunScenario(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScenarioResult{};
}

// First sample at or after `from_s` whose goodput reaches `fraction` of `rate_bps`; -1 if
// none.
double FirstAtRate(const ScenarioResult& r, double from_s, double rate_bps, double fraction) {
  for (const IntervalSample& s : r.series) {
    if (s.t_s > from_s && s.goodput_bps >= fraction * rate_bps) return s.t_s;
  }
  return -1;
}

std::string CcName(CongestionControl cc) { return cc == CongestionControl::kBbr ? "bbr" : "fixed"; }

class FaultTest : public ::testing::TestWithParam<CongestionControl> {};

// A 5 s blackout mid-transfer, shorter than the idle timeout: the transfer survives and
// full rate is back within a few round trips of the end (the probe timeout's backoff is
// bounded, and losses across the silence are not read as congestion).
TEST_P(FaultTest, BlackoutOfFiveSecondsIsSurvivedAndFullRateReturnsWithinFewRtts) {
  ScenarioOptions o = Options(GetParam(), 1024 * kMiB);
  o.schedule = Schedule("6s:loss=1,11s:loss=0");
  o.sample_interval = Duration::Milliseconds(50);
  ScenarioResult r = RunSim(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  EXPECT_GT(r.sender_total.pto_count, 0u);
  // Nothing arrived during the blackout, once what was queued before it (up to one BDP of
  // queue, 58 ms, plus the one-way delay: until ~6.09 s) was through; samples from the
  // one ending after 6.1 s on (t_s is a float sum of 50 ms steps).
  for (const IntervalSample& s : r.series) {
    if (s.t_s > 6.1 + 1e-9 && s.t_s <= 11.0) {
      EXPECT_EQ(s.goodput_bps, 0) << "t=" << s.t_s;
    }
  }
  const double back = FirstAtRate(r, 11.0, kRate, 0.9);
  ASSERT_GT(back, 0) << "goodput never returned to 90 % of the link after the blackout";
  // Within 5 round trips of the end (plus one sample interval of granularity).
  EXPECT_LE(back - 11.0, 5 * kRttS + 0.05) << "full rate returned " << back - 11.0 << " s late";
  RecordProperty("recovery_s", std::to_string(back - 11.0));
}

// A blackout longer than the idle timeout: both ends close with "peer unreachable"
// within the idle timeout, and the run stops by itself.
TEST_P(FaultTest, BlackoutLongerThanIdleTimeoutClosesWithPeerUnreachable) {
  ScenarioOptions o = Options(GetParam(), 1024 * kMiB);
  o.schedule = Schedule("3s:loss=1,63s:loss=0");
  ScenarioResult r = RunSim(o);
  EXPECT_FALSE(r.completed);
  EXPECT_NE(r.stop_reason, "max_virtual_time");
  EXPECT_NE(r.stop_reason, "max_wall_time");
  ASSERT_EQ(r.connections.size(), 1u);
  EXPECT_NE(r.connections[0].error.find("peer unreachable"), std::string::npos)
      << r.connections[0].error;
  // Closed within the idle timeout (30 s) after the last packet, well before the blackout
  // ends.
  EXPECT_LT(r.virtual_s, 3 + 30 + 2);
  // What was delivered before the blackout was verified intact (no error other than
  // the close).
  EXPECT_GT(r.bytes_delivered, 0u);
}

// 5 % loss on the ACK path only: ACKs are cumulative ranges, so the data path loses
// nothing and goodput stays near the loss-free run's.
TEST_P(FaultTest, AsymmetricLossOnTheAckPathOnlyCostsLittle) {
  ScenarioOptions clean = Options(GetParam(), 256 * kMiB);
  ScenarioResult base = RunSim(clean);
  ScenarioOptions o = clean;
  absl::StatusOr<LinkOverrides> rev = ParseLinkOverrides("loss=0.05");
  ASSERT_TRUE(rev.ok()) << rev.status();
  o.reverse = *rev;
  ScenarioResult r = RunSim(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  EXPECT_GT(r.reverse.dropped_loss, 0u);
  EXPECT_EQ(r.forward.dropped_loss, 0u);
  EXPECT_GE(r.goodput_bps, 0.95 * base.goodput_bps);
}

// Link impairments one at a time: reordering of 10 % by 5 ms, 1 % duplication, 0.1 %
// single-bit corruption. Data stays intact; goodput stays within a few percent of the
// clean run's.
TEST_P(FaultTest, ReorderingDuplicationAndCorruptionLeaveDataIntact) {
  ScenarioOptions clean = Options(GetParam(), 256 * kMiB);
  ScenarioResult base = RunSim(clean);
  ASSERT_TRUE(base.delivered_intact) << base.error;
  for (const char* extra : {"reorder=0.1,reorder_delay=5ms", "dup=0.01", "corrupt=1e-3"}) {
    SCOPED_TRACE(extra);
    ScenarioOptions o = clean;
    absl::StatusOr<LinkSpec> spec = ParseLinkSpec(std::string("rate=500mbit,rtt=58ms,") + extra, {});
    ASSERT_TRUE(spec.ok()) << spec.status();
    o.link = *spec;
    ScenarioResult r = RunSim(o);
    EXPECT_TRUE(r.delivered_intact) << r.error;
    EXPECT_GE(r.goodput_bps, 0.95 * base.goodput_bps);
    const LinkCounters& f = r.forward;
    EXPECT_GT(f.reordered + f.duplicated + f.corrupted, 0u);
    if (f.corrupted > 0) {
      // Corrupted datagrams fail the checksum at the receiver; none is taken as data.
      EXPECT_GT(r.receiver_total.checksum_failures + r.receiver_total.malformed_packets, 0u);
    }
  }
}

// The rate drops to a tenth for 5 s and comes back: the transfer completes intact, and
// (with bbr) goodput follows the new rate down and is back at the full rate within a
// second of the return.
TEST_P(FaultTest, RateDropToATenthAndBack) {
  ScenarioOptions o = Options(GetParam(), 768 * kMiB);
  o.schedule = Schedule("5s:rate=50mbit,10s:rate=500mbit");
  o.sample_interval = Duration::Milliseconds(250);
  ScenarioResult r = RunSim(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  double during = 0;
  int n = 0;
  for (const IntervalSample& s : r.series) {
    if (s.t_s > 6 && s.t_s <= 10) {
      during += s.goodput_bps;
      ++n;
    }
  }
  ASSERT_GT(n, 0);
  EXPECT_LE(during / n, 50e6 * 1.01);
  if (GetParam() == CongestionControl::kBbr) {
    EXPECT_GE(during / n, 0.8 * 50e6);
    const double back = FirstAtRate(r, 10.0, kRate, 0.9);
    ASSERT_GT(back, 0);
    EXPECT_LE(back - 10.0, 1.0);
  }
}

// The path MTU falls from 9000 to 1500 mid-transfer with no ICMP (a black hole for large
// packets): black-hole detection drops to the base size, the search finds the new MTU, and
// the transfer goes on intact at nearly full rate (1500-byte packets carry less payload).
TEST_P(FaultTest, PathMtuDropFrom9000To1500IsDetectedAndSearched) {
  ScenarioOptions o = Options(GetParam(), 512 * kMiB);
  // A window near two BDPs, as tuned profiles have: the probe timeout that reveals the
  // black hole fires once a window of packets has vanished.
  o.sender_config.window = 8 * kMiB;
  o.receiver_config.window = 8 * kMiB;
  o.schedule = Schedule("5s:mtu=1500");
  o.sample_interval = Duration::Milliseconds(50);
  ScenarioResult r = RunSim(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  EXPECT_EQ(r.stop_reason, "done");
  EXPECT_GT(r.forward.dropped_too_big, 0u);
  // 1500-byte packets: the payload share of the link is about 1440 / 1528.
  const double back = FirstAtRate(r, 5.0, kRate, 0.9);
  ASSERT_GT(back, 0) << "goodput never returned to 90 % of the link after the MTU drop";
  EXPECT_LE(back - 5.0, 1.0) << "stalled " << back - 5.0 << " s";
  RecordProperty("recovery_s", std::to_string(back - 5.0));
  // Later: no more packets too big (the search settled under 1500).
  double late_rate = 0;
  int n = 0;
  for (const IntervalSample& s : r.series) {
    if (s.t_s > 7 && s.t_s <= 9) {
      late_rate += s.goodput_bps;
      ++n;
    }
  }
  ASSERT_GT(n, 0);
  EXPECT_GE(late_rate / n, 0.85 * kRate);
}

INSTANTIATE_TEST_SUITE_P(Cc, FaultTest,
                         ::testing::Values(CongestionControl::kFixed, CongestionControl::kBbr),
                         [](const auto& info) { return CcName(info.param); });

}  // namespace
}  // namespace longhaul::sim
