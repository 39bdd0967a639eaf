// FecSender in mode auto, fed the receiver's cumulative loss reports directly: what its
// two loss windows make of rare bursts, of a clean link and of the first few losses.
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "transport/core/send/fec_sender.h"

namespace longhaul {
namespace {

constexpr Duration kRtt = Duration::Milliseconds(58);

class Feeder {
 public:
  explicit Feeder(TransportConfig c) : config_(c), fec_(c, c.MaxDatagramSize()) {}
  // One RTT of `packets` packets with `bursts` loss bursts of `burst` packets each.
  void Rtt(uint64_t packets, uint64_t bursts = 0, uint64_t burst = 1) {
    now_ += kRtt;
    received_ += packets - bursts * burst;
    missing_ += bursts * burst;
    bursts_ += bursts;
    wire::LossReportFrame r;
    r.packets_received = received_;
    r.packets_missing = missing_;
    r.loss_bursts = bursts_;
    FecWorkload w;
    w.message_packets = 1886;  // 16 MiB of 8894-byte segments
    w.window_packets = 1 << 17;
    w.messages_per_rtt = 2;
    fec_.OnLossReport(now_, r, kRtt, w);
  }
  // Messages of `message_packets` packets on a link whose round trip carries
  // `rtt_packets` (80 000: 100 Gbit/s over 58 ms).
  void Submit(uint64_t message_packets, uint64_t rtt_packets = 80000) {
    fec_.OnStartWorkload(message_packets, rtt_packets);
  }
  ConnectionDebugState State() const {
    ConnectionDebugState d;
    d.fec_k = fec_.k();
    d.fec_m = fec_.m();
    d.fec_interleave = fec_.interleave();
    fec_.FillDebugState(&d);
    return d;
  }

 private:
  TransportConfig config_;
  FecSender fec_;
  Time now_ = Time::Zero();
  uint64_t received_ = 0, missing_ = 0, bursts_ = 0;
};

TransportConfig Auto() {
  TransportConfig c;
  c.segment = 8894;
  c.fec = FecMode::kAuto;
  return c;
}

TEST(FecAutoTest, ABurstyLinkStaysProtectedBetweenItsRareBursts) {
  // Five bursts of 8 every third RTT of 40 000 packets: a loss rate of 3.3e-4.
  Feeder f(Auto());
  for (int i = 0; i < 200; ++i) f.Rtt(40000, i % 3 == 0 ? 5 : 0, 8);
  // Twenty clean round trips in a row (800 000 packets): the recent window is clean, the
  // long one still holds the bursts.
  for (int i = 0; i < 20; ++i) {
    f.Rtt(40000);
    const ConnectionDebugState d = f.State();
    ASSERT_GT(d.fec_m, 0u) << "after clean round trip " << i << ": " << d.fec_reason;
    EXPECT_GE(d.fec_burst_estimate, 7.0);
    EXPECT_GE(d.fec_loss_estimate, 2.5e-4);
  }
}

TEST(FecAutoTest, ACleanLinkTurnsFecOffOnlyOnceEnoughPacketsShowIt) {
  Feeder f(Auto());
  f.Rtt(20000);
  f.Rtt(20000);
  // 40 000 clean packets bound the loss rate by ~7.5e-5: a 1886-packet message may still
  // lose one with probability ~0.14, so a little parity stays.
  ConnectionDebugState d = f.State();
  EXPECT_GT(d.fec_m, 0u);
  EXPECT_STREQ(d.fec_reason, "meets-target");
  EXPECT_NEAR(d.fec_loss_estimate, 3.0 / 40000, 1e-6);
  // The long window keeps growing while the link stays clean; FEC goes off once the bound
  // falls below the policy's loss floor (1e-6: 3 M packets), not before.
  uint64_t clean = 40000;
  while (clean < 2800000) {
    f.Rtt(200000);
    clean += 200000;
    ASSERT_GT(f.State().fec_m, 0u) << "off after only " << clean << " clean packets";
  }
  for (int i = 0; i < 5; ++i) f.Rtt(200000);
  d = f.State();
  EXPECT_EQ(d.fec_m, 0u) << d.fec_reason << " at loss bound " << d.fec_loss_estimate;
  EXPECT_STREQ(d.fec_reason, "clean-link");
}

TEST(FecAutoTest, TheFirstRoundTripGoesOutWithTheMostParityTheBoundAllows) {
  // Before any loss report: the configured k and interleave, and as much parity as
  // fec_max_overhead (0.25) allows for the messages submitted.
  Feeder f(Auto());
  EXPECT_STREQ(f.State().fec_reason, "start");
  EXPECT_EQ(f.State().fec_m, 4u);  // the configuration, until a message says its size
  f.Submit(8192);                  // whole groups of 8 blocks of 32: 0.25 x 32
  ConnectionDebugState d = f.State();
  EXPECT_EQ(d.fec_k, 32u);
  EXPECT_EQ(d.fec_m, 8u);
  EXPECT_EQ(d.fec_interleave, 8u);
  // 16 MiB: 7 groups of 256 packets and 94 more in 8 shortened blocks, 64 blocks in all:
  // 7 parity each keeps 448 within 0.25 x 1886.
  f.Submit(1886);
  EXPECT_EQ(f.State().fec_m, 7u);
  // The first decision on a clean link: the little parity the 3/n bound calls for, and
  // later submissions no longer change it.
  f.Rtt(20000);
  f.Rtt(20000);
  d = f.State();
  EXPECT_STREQ(d.fec_reason, "meets-target");
  EXPECT_LT(d.fec_m, 7u);
  const uint32_t decided = d.fec_m;
  f.Submit(8192);
  EXPECT_EQ(f.State().fec_m, decided);

  // Messages longer than a round trip (64 MiB at 1 Gbit/s over 58 ms: 7 545 packets
  // against 805) are mostly sent after the first decision: the configured m.
  Feeder slow(Auto());
  slow.Submit(7545, 805);
  EXPECT_EQ(slow.State().fec_m, 4u);
  slow.Submit(1886, 80000);
  EXPECT_EQ(slow.State().fec_m, 7u);
  slow.Submit(7545, 805);
  EXPECT_EQ(slow.State().fec_m, 4u);
  // Small messages (8 shortened blocks of ~15 packets) and a tight bound keep the
  // configured m: the start never lowers it.
  Feeder small(Auto());
  small.Submit(118);
  EXPECT_EQ(small.State().fec_m, 4u);
  TransportConfig c = Auto();
  c.fec_max_overhead = 0.05;
  Feeder tight(c);
  tight.Submit(8192);
  EXPECT_EQ(tight.State().fec_m, 4u);
  // Fixed FEC sends what it is configured with.
  c = Auto();
  c.fec = FecMode::kFixed;
  Feeder fixed(c);
  fixed.Submit(8192);
  d = fixed.State();
  EXPECT_EQ(d.fec_m, 4u);
  EXPECT_STREQ(d.fec_reason, "");
}

TEST(FecAutoTest, TheFirstLossesKeepTheStartingConfiguration) {
  TransportConfig c = Auto();
  c.fec_k = 32;
  c.fec_m = 6;
  c.fec_interleave = 8;
  Feeder f(c);
  // One single loss in 80 000 packets: the policy alone would spend one parity per
  // block; the loss's shape is unknown, so the profile's configuration stays.
  f.Rtt(40000, 1, 1);
  f.Rtt(40000);
  ConnectionDebugState d = f.State();
  EXPECT_STREQ(d.fec_reason, "starting");
  EXPECT_EQ(d.fec_k, 32u);
  EXPECT_EQ(d.fec_m, 6u);
  EXPECT_EQ(d.fec_interleave, 8u);
  // After eight single losses the policy decides alone.
  for (int i = 0; i < 8; ++i) f.Rtt(40000, 1, 1);
  f.Rtt(40000);
  d = f.State();
  EXPECT_STREQ(d.fec_reason, "meets-target");
  EXPECT_LT(d.fec_m, 6u);
}

TEST(FecAutoTest, OneBurstInAShortWindowIsNotARise) {
  // A long clean history, then one burst of 12 in a 600-packet round trip.
  Feeder f(Auto());
  for (int i = 0; i < 100; ++i) f.Rtt(100000);
  f.Rtt(600, 1, 12);
  f.Rtt(600);
  const ConnectionDebugState d = f.State();
  EXPECT_LT(d.fec_loss_estimate, 1e-3) << "one burst of 12 in 600 packets read as a 2 % loss";
}

}  // namespace
}  // namespace longhaul
