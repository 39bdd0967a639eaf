// BbrController driven with synthetic ACK and loss events (no network): the filters,
// the state machine, the congestion classification and the outputs.
#include "transport/core/cc/bbr.h"

#include <string>

#include "gtest/gtest.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/config.h"
#include "transport/core/loss/rtt_estimator.h"
#include "tests/unit/cc/bbr_driver.h"

// In the helpers' namespace (bbr_driver.h): BbrConfig, Driver, FillPipe, kRtt.
namespace longhaul::bbr_testing {
namespace {

TEST(BbrTest, StartsInStartupWithTheInitialWindow) {
  TransportConfig c = BbrConfig();
  c.initial_rate = Bandwidth::Zero();  // the initial packets alone
  BbrController bbr(c);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kStartup);
  EXPECT_STREQ(bbr.ModeName(), "startup");
  EXPECT_NEAR(bbr.pacing_gain(), 2.77, 1e-9);
  EXPECT_EQ(bbr.CongestionWindow(), 10 * c.MaxDatagramSize());
  // The initial window over the configured initial RTT, at startup gain.
  const double expected = 10.0 * c.MaxDatagramSize() * 8 / c.initial_rtt.seconds() * 2.77;
  EXPECT_NEAR(bbr.PacingRate().bps(), expected, expected * 1e-6);
  EXPECT_TRUE(bbr.bandwidth().IsZero());
}

TEST(BbrTest, TheFirstRoundTripIsPacedAtTheInitialRate) {
  TransportConfig c = BbrConfig();
  c.initial_rate = Bandwidth::Mbps(100);
  c.initial_rtt = Duration::Milliseconds(58);
  BbrController bbr(c);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kStartup);
  // The window is the initial rate's BDP over the assumed RTT (725 kB), paced at that
  // rate: the window spreads over the round trip instead of leaving in a third of it.
  EXPECT_EQ(bbr.CongestionWindow(), 725000);
  EXPECT_NEAR(bbr.PacingRate().bps(), 100e6, 1);
  // The model holds nothing of it: no bandwidth until the first sample.
  EXPECT_TRUE(bbr.bandwidth().IsZero());
  // Below the initial packets' own rate, those win (a short RTT).
  c.initial_rate = Bandwidth::Mbps(1);
  c.initial_rtt = Duration::Milliseconds(1);
  BbrController small(c);
  EXPECT_EQ(small.CongestionWindow(), 10 * c.MaxDatagramSize());
  const double packets_rate = 10.0 * c.MaxDatagramSize() * 8 / 1e-3 * 2.77;
  EXPECT_NEAR(small.PacingRate().bps(), packets_rate, packets_rate * 1e-6);
  // A cap (`rate`) bounds it, and the configured window bounds the window.
  c.initial_rate = Bandwidth::Gbps(1);
  c.initial_rtt = Duration::Milliseconds(58);
  c.rate = Bandwidth::Mbps(200);
  c.window = 1000000;
  BbrController capped(c);
  EXPECT_NEAR(capped.PacingRate().bps(), 200e6, 1);
  EXPECT_EQ(capped.CongestionWindow(), 1000000);
}

TEST(BbrTest, StartupGrowsThenStopsAfterThreeRoundsWithoutGrowth) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  Bandwidth r = Bandwidth::Mbps(10);
  for (int i = 0; i < 10; ++i) {
    r = r.Scaled(2);
    d.Round(r, kRtt);
    ASSERT_EQ(bbr.mode(), BbrController::Mode::kStartup) << "round " << i;
    EXPECT_GE(bbr.PacingRate().bps(), 2.7 * bbr.bandwidth().bps() * 0.99);
  }
  EXPECT_FALSE(bbr.full_bw_reached());
  // Plateau: the bandwidth stops growing; three rounds later startup is over.
  for (int i = 0; i < 4; ++i) d.Round(r, kRtt);
  EXPECT_TRUE(bbr.full_bw_reached());
  EXPECT_NE(bbr.mode(), BbrController::Mode::kStartup);
  EXPECT_NEAR(bbr.bandwidth().bps(), r.bps(), r.bps() * 1e-6);
}

TEST(BbrTest, DrainThenProbeBwWithTheModelsBdpAndTwiceItAsWindow) {
  TransportConfig c = BbrConfig();
  BbrController bbr(c);
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kProbeBw);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
  const ByteCount bdp = link.BytesIn(kRtt);  // 72.5 MB
  EXPECT_NEAR(static_cast<double>(bbr.Bdp()), static_cast<double>(bdp), bdp * 1e-6);
  // cwnd = 2 x BDP plus the ACK allowance (a few hundred packets at most).
  EXPECT_GE(bbr.CongestionWindow(), 2 * bdp);
  EXPECT_LE(bbr.CongestionWindow(), 2 * bdp + 256 * c.MaxDatagramSize());
  // Pacing at most 1.25x (probing) and at least 0.75x of the model, 1% below.
  EXPECT_LE(bbr.PacingRate().bps(), link.bps() * 2.0);
  EXPECT_GE(bbr.PacingRate().bps(), link.bps() * 0.5 * 0.99);
}

TEST(BbrTest, CongestionWindowIsBoundedByTheConfiguredWindow) {
  TransportConfig c = BbrConfig();
  c.window = ByteCount{16} << 20;  // 16 MiB, far below 2 x BDP at 10 Gbit/s x 58 ms
  BbrController bbr(c);
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  EXPECT_EQ(bbr.CongestionWindow(), c.window);
}

TEST(BbrTest, PacingRateIsCappedByConfigRate) {
  TransportConfig c = BbrConfig();
  c.rate = Bandwidth::Gbps(2);
  BbrController bbr(c);
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  EXPECT_LE(bbr.PacingRate().bps(), 2e9);
  EXPECT_EQ(bbr.DebugState().pacing_rate.bps(), bbr.PacingRate().bps());
}

TEST(BbrTest, ProbeBwCyclesThroughDownCruiseAndUp) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  bool seen_up = false, seen_down = false, seen_cruise = false;
  for (int i = 0; i < 40; ++i) {
    // In flight follows the gain: above the BDP while probing, below it otherwise.
    d.set_in_flight(static_cast<ByteCount>(bbr.pacing_gain() * link.BytesIn(kRtt)));
    d.Round(link, kRtt);
    const std::string mode = bbr.ModeName();
    seen_up |= mode == "probe_bw_up";
    seen_down |= mode == "probe_bw_down";
    seen_cruise |= mode == "probe_bw_cruise";
    if (mode == "probe_bw_up") {
      EXPECT_GE(bbr.pacing_gain(), 1.05);  // the fair probe's floor
    }
    if (mode == "probe_bw_cruise") {
      EXPECT_EQ(bbr.pacing_gain(), 1.0);
    }
  }
  EXPECT_TRUE(seen_up);
  EXPECT_TRUE(seen_down);
  EXPECT_TRUE(seen_cruise);
  // No loss, no queue: nothing was counted as congestion and the model holds the link.
  EXPECT_EQ(bbr.congestion_events(), 0u);
  EXPECT_EQ(bbr.queue_drains(), 0u);
  EXPECT_NEAR(bbr.bandwidth().bps(), link.bps(), link.bps() * 1e-6);
}

TEST(BbrTest, TheBandwidthFilterForgetsAfterTenRounds) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  // The path's rate drops silently (no loss, no queue signal): the max filter keeps
  // 10 Gbit/s for its window, then follows.
  for (int i = 0; i < 5; ++i) d.Round(Bandwidth::Gbps(4), kRtt);
  EXPECT_NEAR(bbr.bandwidth().bps(), 10e9, 1e3);
  for (int i = 0; i < 8; ++i) d.Round(Bandwidth::Gbps(4), kRtt);
  EXPECT_NEAR(bbr.bandwidth().bps(), 4e9, 1e3);
}

TEST(BbrTest, AppLimitedSamplesDoNotLowerTheModel) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  for (int i = 0; i < 20; ++i) {
    d.Round(Bandwidth::Gbps(1), kRtt, 16, 0, 0, /*app_limited=*/true);
  }
  EXPECT_NEAR(bbr.bandwidth().bps(), 10e9, 1e3);
}

TEST(BbrTest, RandomLossWithoutQueueIsNotCongestion) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  const ByteCount packet = 8192;
  const uint64_t per_round = link.BytesIn(kRtt) / packet;  // ~8850 packets
  for (int i = 0; i < 30; ++i) {
    d.Round(link, kRtt);
    d.Loss(per_round / 100, packet, kRtt);  // 1% per round, RTT at its minimum
  }
  EXPECT_EQ(bbr.congestion_events(), 0u);
  EXPECT_NEAR(bbr.bandwidth().bps(), link.bps(), link.bps() * 1e-6);
  EXPECT_NEAR(bbr.last_round_loss_rate(), 0.01, 0.002);
  EXPECT_NEAR(bbr.DebugState().loss_rate, bbr.last_round_loss_rate(), 1e-12);
}

TEST(BbrTest, LossWithQueueingDelayIsCongestion) {
  // Long cruises, so that the loss below comes outside a probe (losses in a probe's own
  // queue end the probe instead: bbr_probe_test.cc).
  BbrParams p;
  p.probe_bw.cruise_rounds_min = p.probe_bw.cruise_rounds_max = 20;
  BbrController bbr(BbrConfig(), 1, p);
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  for (int i = 0; i < 20 && bbr.phase() != BbrController::Phase::kCruise; ++i) d.Round(link, kRtt);
  ASSERT_EQ(bbr.phase(), BbrController::Phase::kCruise);
  // The link drops to 5 Gbit/s: the queue grows, then overflows.
  for (int i = 0; i < 2; ++i) d.Round(Bandwidth::Gbps(5), kRtt);
  d.Loss(10, 8192, kRtt * 2);  // the RTT shows a full BDP of queue
  EXPECT_EQ(bbr.congestion_events(), 1u);
  // The model restarts from what the path delivered lately, x 0.9, and drains.
  EXPECT_NEAR(bbr.bandwidth().bps(), 0.9 * 5e9, 0.05 * 5e9);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kProbeBw);
  EXPECT_EQ(bbr.phase(), BbrController::Phase::kDown);
  EXPECT_LT(bbr.pacing_gain(), 1.0);
  // At most once per round: more losses of the same episode are not answered again.
  d.Loss(10, 8192, kRtt * 2);
  EXPECT_EQ(bbr.congestion_events(), 1u);
}

TEST(BbrTest, LossRateAboveTheThresholdIsCongestionWithoutQueue) {
  TransportConfig c = BbrConfig();
  c.cc_loss_threshold = 0.02;
  BbrController bbr(c);
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  const uint64_t per_round = link.BytesIn(kRtt) / 8192;
  d.Round(link, kRtt);
  d.Loss(per_round / 20, 8192, kRtt);  // 5% in one round, no queueing delay
  d.Round(link, kRtt);                 // the round ends: its loss rate is judged
  d.Round(link, kRtt);
  EXPECT_EQ(bbr.congestion_events(), 1u);
  EXPECT_LT(bbr.bandwidth().bps(), link.bps());
}

TEST(BbrTest, FewLossesDoNotMakeALossRate) {
  TransportConfig c = BbrConfig();
  c.cc_loss_threshold = 0.001;
  BbrController bbr(c);
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Mbps(100));  // ~88 packets per round
  d.Round(Bandwidth::Mbps(100), kRtt);
  d.Loss(3, 8192, kRtt);  // 3% of the round but below min_loss_packets
  for (int i = 0; i < 3; ++i) d.Round(Bandwidth::Mbps(100), kRtt);
  EXPECT_EQ(bbr.congestion_events(), 0u);
}

TEST(BbrTest, StartupIgnoresQueueLossesButEndsOnAHighLossRate) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  d.Round(Bandwidth::Mbps(100), kRtt);
  d.Round(Bandwidth::Mbps(200), kRtt);
  // A busy link: others' queue and overflow. Startup goes on.
  d.Loss(2, 8192, kRtt * 2);
  d.Round(Bandwidth::Mbps(400), kRtt * 2);
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kStartup);
  // Its own loss rate is high: startup ends (drain).
  d.Loss(200, 8192, kRtt * 2);
  d.Round(Bandwidth::Mbps(800), kRtt * 2);
  EXPECT_TRUE(bbr.full_bw_reached());
  EXPECT_NE(bbr.mode(), BbrController::Mode::kStartup);
}

TEST(BbrTest, AStandingQueueReanchorsTheModelAndDrainsDeep) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  // Another flow took 40% of the link; this flow's packets now wait in a queue of half an
  // RTT through whole rounds, without loss. In flight holds its share of that queue.
  d.set_in_flight(static_cast<ByteCount>(1.3 * static_cast<double>(link.BytesIn(kRtt))));
  int rounds = 0;
  for (; rounds < 12 && bbr.queue_drains() == 0; ++rounds) {
    d.Round(Bandwidth::Gbps(6), kRtt.Scaled(1.5));
  }
  ASSERT_EQ(bbr.queue_drains(), 1u);
  EXPECT_LE(rounds, 6);  // well before the max filter would have let go of 10 Gbit/s
  EXPECT_EQ(bbr.congestion_events(), 0u);
  // The model is re-anchored on what the path delivered (10 -> 6 Gbit/s at once rather
  // than after the max filter's 10 rounds) and the queue is drained at gain 0.5.
  EXPECT_LE(bbr.bandwidth().bps(), 6e9 * 1.001);
  EXPECT_GE(bbr.bandwidth().bps(), 0.85 * 6e9);
  EXPECT_EQ(bbr.phase(), BbrController::Phase::kDown);
  EXPECT_NEAR(bbr.pacing_gain(), 0.5, 1e-9);
}

// Cutting the model of a flow that sends less than it (app-limited: messages) only
// queues messages at the sender: app-limited rounds over a standing queue do not drain.
TEST(BbrTest, AppLimitedRoundsOverAStandingQueueDoNotDrain) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(10);
  FillPipeThenQueue(&d, &bbr, link);
  const double bw_before = bbr.bandwidth().bps();
  for (int i = 0; i < 20; ++i) {
    // The queue grows every round: never mistaken for the path's RTT.
    d.Round(Bandwidth::Gbps(4), kRtt.Scaled(1.3 + 0.1 * i), 16, 0, 0, /*app_limited=*/true);
  }
  EXPECT_EQ(bbr.queue_drains(), 0u);
  EXPECT_EQ(bbr.path_rtt_changes(), 0u);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * bw_before);
}

// rate_min: the model starts at that bandwidth (window and pacing from the first packet,
// no startup ramp from ten packets) and never goes below it.
TEST(BbrTest, RateMinIsTheBandwidthFromTheStartAndAFloor) {
  TransportConfig c = BbrConfig();
  c.rate_min = Bandwidth::Gbps(1);
  c.initial_rtt = kRtt;
  BbrController bbr(c);
  EXPECT_EQ(bbr.bandwidth(), c.rate_min);
  EXPECT_GE(bbr.CongestionWindow(), c.rate_min.BytesIn(kRtt));
  EXPECT_GE(bbr.PacingRate().bps(), c.rate_min.bps());
  TransportConfig plain = BbrConfig();
  plain.initial_rtt = kRtt;
  BbrController without(plain);
  EXPECT_LT(without.CongestionWindow(), bbr.CongestionWindow() / 10);
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(2));
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * 2e9);  // above the floor, the estimate
  for (int i = 0; i < 40; ++i) d.Round(Bandwidth::Mbps(200), kRtt);
  EXPECT_EQ(bbr.bandwidth(), c.rate_min);
  EXPECT_GE(bbr.PacingRate().bps(), 0.9 * c.rate_min.bps());
}

TEST(BbrTest, EcnMarksCutInProportionToAlpha) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  EXPECT_EQ(bbr.ecn_reductions(), 0u);
  // Cruise rounds where 10% of the ECN-capable packets come back CE-marked.
  for (int i = 0; i < 40 && bbr.phase() != BbrController::Phase::kCruise; ++i) {
    d.Round(link, kRtt);
  }
  ASSERT_EQ(bbr.phase(), BbrController::Phase::kCruise);
  const double alpha_before = bbr.ecn_alpha();
  const double bw_before = bbr.bandwidth().bps();
  d.Round(link, kRtt, 16, /*ce=*/100, /*ect=*/900);
  d.Round(link, kRtt);  // the marked round ends
  EXPECT_NEAR(bbr.last_round_ce_fraction(), 0.1, 1e-12);
  const double alpha = (1 - 1.0 / 16) * alpha_before + 0.1 / 16;
  EXPECT_NEAR(bbr.ecn_alpha(), alpha, 1e-9);
  ASSERT_EQ(bbr.ecn_reductions(), 1u);
  EXPECT_NEAR(bbr.bandwidth().bps(), (1 - alpha / 2) * bw_before, 0.02 * bw_before);
  const CcDebugState s = bbr.DebugState();
  EXPECT_NEAR(s.ce_fraction, 0.1, 1e-12);
  EXPECT_NEAR(s.ecn_alpha, bbr.ecn_alpha(), 1e-12);
}

TEST(BbrTest, AlphaDecaysWithoutMarks) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(1));
  for (int i = 0; i < 50; ++i) d.Round(Bandwidth::Gbps(1), kRtt, 16, 0, 1000);
  EXPECT_LT(bbr.ecn_alpha(), 0.1);
  EXPECT_EQ(bbr.ecn_reductions(), 0u);
}

TEST(BbrTest, ProbeRttAfterTenSecondsHoldsHalfTheBdp) {
  TransportConfig c = BbrConfig();
  BbrController bbr(c);
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  // Ten seconds of rounds whose RTT never gets back to the minimum.
  int rounds = 0;
  while (bbr.mode() != BbrController::Mode::kProbeRtt && rounds < 400) {
    d.Round(link, kRtt + Duration::Milliseconds(3));
    ++rounds;
  }
  ASSERT_EQ(bbr.mode(), BbrController::Mode::kProbeRtt);
  EXPECT_STREQ(bbr.ModeName(), "probe_rtt");
  EXPECT_GE(rounds, 150);  // ~10 s / 61 ms
  const ByteCount half_bdp = bbr.Bdp(0.5);
  EXPECT_LE(bbr.CongestionWindow(), half_bdp + c.MaxDatagramSize());
  EXPECT_GT(bbr.CongestionWindow(), 1000 * c.MaxDatagramSize());  // not 4 packets
  // In flight falls to the probe window; after max(200 ms, a round) it is over.
  d.set_in_flight(half_bdp / 2);
  for (int i = 0; i < 8 && bbr.mode() == BbrController::Mode::kProbeRtt; ++i) {
    d.Round(link.Scaled(0.5), kRtt);
  }
  EXPECT_EQ(bbr.mode(), BbrController::Mode::kProbeBw);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
  EXPECT_GT(bbr.CongestionWindow(), half_bdp);
}

TEST(BbrTest, ProbeGainAsksEveryFlowForTheSamePacketsMore) {
  // 1 + 1000 / (packets per RTT), within [1.05, 1.75]: the same absolute probe for all.
  TransportConfig c = BbrConfig();
  auto gain_at = [&](Bandwidth rate) {
    BbrController bbr(c);
    Driver d(&bbr);
    FillPipe(&d, &bbr, rate);
    return bbr.ProbeGain();
  };
  auto packets = [&](double bps) { return bps * 0.058 / 8 / c.MaxDatagramSize(); };
  const double g10 = gain_at(Bandwidth::Gbps(10));
  const double g2 = gain_at(Bandwidth::Gbps(2));
  EXPECT_NEAR(g10, 1 + 1000 / packets(10e9), 2e-3);
  EXPECT_NEAR(g2, 1 + 1000 / packets(2e9), 1e-2);
  // The same packets more per round trip: (gain - 1) x size is the same for both.
  EXPECT_NEAR((g10 - 1) * packets(10e9), (g2 - 1) * packets(2e9), 20);
  EXPECT_NEAR(gain_at(Bandwidth::Mbps(100)), 1.75, 1e-9);  // clamped down
  EXPECT_NEAR(gain_at(Bandwidth::Gbps(100)), 1.05, 1e-9);  // clamped up
}

TEST(BbrTest, DebugStateNamesTheModeAndTheEstimates) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  const CcDebugState s = bbr.DebugState();
  EXPECT_EQ(std::string(s.mode).rfind("probe_bw_", 0), 0u) << s.mode;
  EXPECT_EQ(s.bandwidth_estimate.bps(), bbr.bandwidth().bps());
  EXPECT_EQ(s.min_rtt, kRtt);
  EXPECT_EQ(s.pacing_gain, bbr.pacing_gain());
  EXPECT_EQ(s.cwnd_gain, 2.0);
  EXPECT_EQ(s.cwnd, bbr.CongestionWindow());
  EXPECT_TRUE(s.full_bw_reached);
  EXPECT_GT(s.rounds, 10u);
}

TEST(BbrTest, SameSeedSameBehaviourDifferentSeedDifferentProbeTimes) {
  auto trace = [](uint64_t seed) {
    BbrController bbr(BbrConfig(), seed);
    Driver d(&bbr);
    FillPipe(&d, &bbr, Bandwidth::Gbps(10));
    std::string t;
    for (int i = 0; i < 60; ++i) {
      d.Round(Bandwidth::Gbps(10), kRtt);
      t += bbr.ModeName()[9];  // d(own), c(ruise), u(p)
    }
    return t;
  };
  EXPECT_EQ(trace(1), trace(1));
  EXPECT_NE(trace(1), trace(2));
}

TEST(BbrTest, PersistentLossKeepsTheModel) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillPipe(&d, &bbr, Bandwidth::Gbps(10));
  LossEvent pto;
  pto.now = d.now();
  pto.persistent = true;
  RttEstimator rtt(kRtt);
  bbr.OnLoss(pto, rtt);
  EXPECT_EQ(bbr.congestion_events(), 0u);
  EXPECT_NEAR(bbr.bandwidth().bps(), 10e9, 1e3);
}

TEST(BbrTest, FactoryMakesTheConfiguredController) {
  TransportConfig c = BbrConfig();
  EXPECT_STREQ(MakeCongestionController(c)->DebugState().mode, "startup");
  c.cc = CongestionControl::kFixed;
  c.rate = Bandwidth::Gbps(3);
  auto fixed = MakeCongestionController(c);
  EXPECT_STREQ(fixed->DebugState().mode, "fixed");
  EXPECT_EQ(fixed->PacingRate().bps(), 3e9);
  EXPECT_EQ(fixed->CongestionWindow(), c.window);
}

TEST(BbrTest, LossThresholdIsValidated) {
  TransportConfig c = BbrConfig();
  c.cc_loss_threshold = 0.05;
  EXPECT_TRUE(c.Validate().ok());
  c.cc_loss_threshold = 1.5;
  EXPECT_FALSE(c.Validate().ok());
  EXPECT_NE(std::string(c.Validate().message()).find("cc_loss_threshold"), std::string::npos);
  c.cc_loss_threshold = -0.1;
  EXPECT_FALSE(c.Validate().ok());
}

}  // namespace
}  // namespace longhaul::bbr_testing
