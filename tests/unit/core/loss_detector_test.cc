// LossDetector driven with a synthetic sent-packet table and RTT samples: the packet
// and time thresholds, the prefix walk and the loss timer, the FEC allowance, spurious
// widening, and the probe timeout with its backoff and bounds.
#include "transport/core/loss/loss_detector.h"

#include <vector>

#include "gtest/gtest.h"
#include "transport/core/config.h"
#include "transport/core/loss/rtt_estimator.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {
namespace {

constexpr Duration kRtt = Duration::Milliseconds(50);
const Time kT0 = Time::Zero() + Duration::Seconds(1);

TransportConfig Config() {
  TransportConfig c;
  c.reorder_packets = 16;
  c.reorder_rtt_fraction = 0.125;
  c.min_pto = Duration::Milliseconds(5);
  c.max_pto = Duration::Seconds(2);
  c.max_ack_delay = Duration::Milliseconds(1);
  c.fec_flush = Duration::Milliseconds(1);
  return c;
}

// A sender's table with `n` packets, packet i sent at kT0 + i * spacing.
class Fixture {
 public:
  explicit Fixture(TransportConfig config = Config()) : loss_(config), rtt_(kRtt) {
    rtt_.OnSample(kRtt, Duration::Zero());  // srtt = latest = 50 ms, rttvar = 25 ms
  }

  void Send(int n, Duration spacing, bool fec_member = false) {
    for (int i = 0; i < n; ++i) {
      const PacketNumber pn = sent_.next_packet_number();
      SentPacket& p = sent_.Add();
      p.sent_time = kT0 + spacing * static_cast<int64_t>(pn);
      p.in_flight = true;
      p.ack_eliciting = true;
      p.fec_member = fec_member;
    }
  }
  // Acknowledges `pn` as an ACK frame with that largest packet would.
  void Ack(PacketNumber pn) {
    sent_.Finish(pn);
    sent_.MarkAcked(pn);
    loss_.OnAckReceived(pn, /*newly_acked=*/true);
  }
  std::vector<PacketNumber> Detect(Time now, LossDetector::FecSpan fec = {}) {
    std::vector<PacketNumber> lost;
    loss_.DetectLosses(now, rtt_, fec, &sent_, [&](PacketNumber pn, SentPacket& p) {
      EXPECT_TRUE(p.lost);
      EXPECT_TRUE(p.finished);
      lost.push_back(pn);
    });
    return lost;
  }

  LossDetector loss_;
  RttEstimator rtt_;
  SentPacketTable sent_;
};

TEST(LossDetectorTest, NothingIsLostBeforeTheFirstAck) {
  Fixture f;
  f.Send(100, Duration::Zero());
  EXPECT_TRUE(f.Detect(kT0 + Duration::Seconds(10)).empty());
  EXPECT_EQ(f.loss_.loss_time(), Time::Infinite());
  EXPECT_FALSE(f.loss_.debug_state().has_largest_acked);
}

TEST(LossDetectorTest, PacketThresholdDeclaresAPrefixLost) {
  Fixture f;
  f.Send(40, Duration::Zero());
  f.Ack(20);
  // 20 - pn >= 16: packets 0..4 are lost; 5 is the first one that is not.
  EXPECT_EQ(f.Detect(kT0), (std::vector<PacketNumber>{0, 1, 2, 3, 4}));
  // The timer is armed for packet 5's time threshold: 1.125 x 50 ms after it was sent.
  EXPECT_EQ(f.loss_.loss_time(), kT0 + Duration::Microseconds(56250));
  EXPECT_EQ(f.loss_.largest_acked(), 20u);
  // A walk at the same time finds nothing more; packets above the largest ACK are never
  // candidates.
  EXPECT_TRUE(f.Detect(kT0).empty());
}

TEST(LossDetectorTest, TimeThresholdDeclaresOlderPacketsLost) {
  Fixture f;
  f.Send(10, Duration::Milliseconds(10));  // packet i sent at kT0 + 10i ms
  f.Ack(9);                                // fewer than 16 later packets: time decides
  EXPECT_TRUE(f.Detect(kT0 + Duration::Milliseconds(50)).empty());
  EXPECT_EQ(f.loss_.loss_time(), kT0 + Duration::Microseconds(56250));
  // At 76.25 ms packets 0, 1 and 2 have been out for 56.25 ms or more.
  EXPECT_EQ(f.Detect(kT0 + Duration::Microseconds(76250)), (std::vector<PacketNumber>{0, 1, 2}));
  EXPECT_EQ(f.loss_.loss_time(), kT0 + Duration::Microseconds(86250));
}

TEST(LossDetectorTest, TheTimeThresholdFollowsARisingRtt) {
  Fixture f;
  f.rtt_.OnSample(Duration::Milliseconds(200), Duration::Zero());  // latest 200 ms > srtt
  EXPECT_EQ(f.loss_.LossDelay(f.rtt_), Duration::Milliseconds(225));
  RttEstimator tiny(Duration::Microseconds(10));
  tiny.OnSample(Duration::Microseconds(10), Duration::Zero());
  EXPECT_EQ(f.loss_.LossDelay(tiny), LossDetector::kGranularity);
}

TEST(LossDetectorTest, FecMembersGetTheirBlocksSpan) {
  Fixture f;
  f.Send(40, Duration::Zero(), /*fec_member=*/true);
  f.Ack(39);
  const LossDetector::FecSpan fec{32, Duration::Milliseconds(3)};
  // Packet threshold 16 + 32: none is lost by count (39 - 0 < 48).
  EXPECT_TRUE(f.Detect(kT0, fec).empty());
  // Time threshold 56.25 ms + 3 ms wire time + 1 ms flush.
  EXPECT_EQ(f.loss_.loss_time(), kT0 + Duration::Microseconds(60250));
  EXPECT_TRUE(f.Detect(kT0 + Duration::Microseconds(60249), fec).empty());
  EXPECT_EQ(f.Detect(kT0 + Duration::Microseconds(60250), fec).size(), 39u);
}

TEST(LossDetectorTest, SpuriousLossWidensBothThresholdsUpToTheirBounds) {
  TransportConfig c = Config();
  c.reorder_packets = 3;
  c.reorder_rtt_fraction = 0.25;
  Fixture f(c);
  f.loss_.OnSpuriousLoss();
  EXPECT_EQ(f.loss_.debug_state().reorder_packets, 6u);
  EXPECT_DOUBLE_EQ(f.loss_.debug_state().reorder_rtt_fraction, 0.5);
  EXPECT_EQ(f.loss_.LossDelay(f.rtt_), Duration::Milliseconds(75));
  for (int i = 0; i < 30; ++i) f.loss_.OnSpuriousLoss();
  EXPECT_EQ(f.loss_.debug_state().reorder_packets, LossDetector::kMaxReorderPackets);
  EXPECT_DOUBLE_EQ(f.loss_.debug_state().reorder_rtt_fraction, 1.0);
  // The widened packet threshold applies to the next walk.
  f.Send(10, Duration::Zero());
  f.Ack(9);
  EXPECT_TRUE(f.Detect(kT0).empty());
}

TEST(LossDetectorTest, ProbeTimeoutKeepsItsPeriodThroughConsecutiveTimeouts) {
  Fixture f;
  // 50 ms + 4 x 25 ms + 1 ms.
  EXPECT_EQ(f.loss_.PtoPeriod(f.rtt_), Duration::Milliseconds(151));
  EXPECT_EQ(f.loss_.PtoTime(kT0, f.rtt_), kT0 + Duration::Milliseconds(151));
  f.loss_.OnPtoFired();
  EXPECT_EQ(f.loss_.debug_state().pto_backoff, 1u);
  // No doubling: a path that comes back after an outage is probed within one period.
  EXPECT_EQ(f.loss_.PtoPeriod(f.rtt_), Duration::Milliseconds(151));
  for (int i = 0; i < 10; ++i) f.loss_.OnPtoFired();
  EXPECT_EQ(f.loss_.PtoPeriod(f.rtt_), Duration::Milliseconds(151));
  // max_pto bounds the period when the RTT estimate exceeds it.
  RttEstimator slow(Duration::Seconds(3));
  slow.OnSample(Duration::Seconds(3), Duration::Zero());
  EXPECT_EQ(f.loss_.PtoPeriod(slow), Duration::Seconds(2));
  // An ACK of nothing new keeps the backoff; one of something new resets it.
  f.Send(2, Duration::Zero());
  f.loss_.OnAckReceived(0, /*newly_acked=*/false);
  EXPECT_EQ(f.loss_.debug_state().pto_backoff, 11u);
  f.loss_.OnAckReceived(1, /*newly_acked=*/true);
  EXPECT_EQ(f.loss_.debug_state().pto_backoff, 0u);
  EXPECT_EQ(f.loss_.PtoPeriod(f.rtt_), Duration::Milliseconds(151));
}

TEST(LossDetectorTest, ProbeTimeoutIsAtLeastMinPto) {
  Fixture f;
  RttEstimator fast(Duration::Microseconds(200));
  fast.OnSample(Duration::Microseconds(200), Duration::Zero());
  // 200 us + 4 x 100 us + 1 ms = 1.6 ms, below min_pto.
  EXPECT_EQ(f.loss_.PtoPeriod(fast), Duration::Milliseconds(5));
  f.loss_.OnPtoFired();
  EXPECT_EQ(f.loss_.PtoPeriod(fast), Duration::Milliseconds(5));
}

TEST(LossDetectorTest, ATimeoutAsksForTwoProbes) {
  Fixture f;
  EXPECT_EQ(f.loss_.probes_pending(), 0u);
  f.loss_.OnPtoFired();
  EXPECT_EQ(f.loss_.probes_pending(), LossDetector::kProbesPerTimeout);
  f.loss_.OnProbeSent();
  f.loss_.OnProbeSent();
  EXPECT_EQ(f.loss_.probes_pending(), 0u);
  f.loss_.OnProbeSent();  // no underflow
  EXPECT_EQ(f.loss_.probes_pending(), 0u);
}

TEST(LossDetectorTest, LargestAckedNeverMovesBack) {
  Fixture f;
  f.Send(10, Duration::Zero());
  f.loss_.OnAckReceived(7, true);
  f.loss_.OnAckReceived(3, true);
  EXPECT_EQ(f.loss_.largest_acked(), 7u);
}

}  // namespace
}  // namespace longhaul
