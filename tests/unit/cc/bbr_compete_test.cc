// BbrController on a link shared with traffic that keeps a queue: competing (cc_compete,
// the default), yielding (cc_yield or cc_compete off) and taking a path's new RTT.
#include <algorithm>

#include "gtest/gtest.h"
#include "tests/unit/cc/bbr_driver.h"
#include "transport/core/cc/bbr.h"
#include "transport/core/config.h"

// In the helpers' namespace (bbr_driver.h): BbrConfig, Driver, FillPipe, kRtt.
namespace longhaul::bbr_testing {
namespace {

// One round trip of `rate` whose RTT samples alternate between `low` and `high`: a queue
// that other traffic keeps and moves (it probes) within the round.
void MovingQueueRound(Driver* d, Bandwidth rate, Duration low, Duration high, int acks = 16) {
  const ByteCount bytes = std::max<ByteCount>(rate.BytesIn(low) / acks, 1);
  for (int i = 0; i < acks; ++i) {
    const Duration rtt = i % 2 == 0 ? low : high;
    d->Ack(rtt / acks, bytes, rate, rtt);
  }
}

// Traffic that keeps a queue whatever longhaul does (TCP CUBIC or BBR filling the
// buffer): drains that never see the queue empty. After more than two responses to a
// queue that was not seen empty for three rounds in a row, spread over at least 40
// rounds, the flow competes: no more queue-based cuts; loss counts as an episode (after
// 16 loss-free rounds) or above 8 x cc_loss_threshold; eight rounds with an empty queue
// end it; a competitor seen within the last 10 s is recognised after one failed drain.
TEST(BbrTest, CompetesByDefault) { EXPECT_TRUE(TransportConfig().cc_compete); }

TEST(BbrTest, CompetesWhenDrainsNeverEmptyTheQueue) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(10);
  const Bandwidth share = Bandwidth::Gbps(5);
  const Duration low = kRtt.Scaled(1.5);
  const Duration high = kRtt.Scaled(1.6);
  FillPipeThenQueue(&d, &bbr, link);
  int rounds = 0;
  for (; rounds < 200 && !bbr.competing(); ++rounds) MovingQueueRound(&d, share, low, high);
  ASSERT_TRUE(bbr.competing()) << "after " << rounds << " rounds";
  EXPECT_GE(rounds, 40);  // not before: a newcomer's startup keeps a queue that long
  EXPECT_GE(bbr.queue_drains(), 3u);
  EXPECT_EQ(bbr.competing_entries(), 1u);
  // The queue stays: no further drains, and the model climbs back to what the flow gets.
  const uint64_t drains = bbr.queue_drains();
  for (int i = 0; i < 40; ++i) d.Round(share, low);
  EXPECT_EQ(bbr.queue_drains(), drains);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * share.bps());
  // Overflow after a long loss-free stretch (a loss-based competitor's episode): one cut.
  const uint64_t before = bbr.congestion_events();
  const ByteCount round_bytes = share.BytesIn(low);
  const uint64_t five_percent = round_bytes / 8192 / 19;
  d.Loss(five_percent, 8192, low);
  d.Round(share, low);
  d.Round(share, low);
  EXPECT_EQ(bbr.congestion_events(), before + 1);
  EXPECT_LE(bbr.bandwidth().bps(), 0.52 * share.bps());
  // 5% loss in every round (TCP BBR keeps the buffer overflowing) is below 8 x 3%: no
  // episode, no cut. The queue never emptied after the episode: the competitor did not
  // answer the loss, and the cut is undone.
  for (int i = 0; i < 10; ++i) {
    d.Loss(five_percent, 8192, low);
    d.Round(share, low);
  }
  EXPECT_EQ(bbr.congestion_events(), before + 1);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * share.bps());
  EXPECT_TRUE(bbr.competing());
  // Nor is 19% (both flows' probes overflowing the buffer); 30% is congestion.
  const auto lossy_rounds = [&](double rate, int n) {
    for (int i = 0; i < n; ++i) {
      d.Loss(static_cast<uint64_t>(rate / (1 - rate) * round_bytes / 8192), 8192, low);
      d.Round(share, low);
    }
  };
  lossy_rounds(0.19, 5);
  EXPECT_EQ(bbr.congestion_events(), before + 1);
  lossy_rounds(0.30, 1);
  EXPECT_EQ(bbr.congestion_events(), before + 2);
  EXPECT_TRUE(bbr.competing());
  // The competitor leaves: eight rounds at min RTT end the competition.
  for (int i = 0; i < 8; ++i) d.Round(link, kRtt);
  EXPECT_FALSE(bbr.competing());
  // It comes back within 10 s: one failed drain is enough.
  for (int i = 0; i < 40 && !bbr.competing(); ++i) MovingQueueRound(&d, share, low, high);
  EXPECT_TRUE(bbr.competing());
  EXPECT_EQ(bbr.queue_drains(), drains + 1);
  EXPECT_EQ(bbr.competing_entries(), 2u);
}

// The response that finds the queue persistent starts competing and does not cut: a cut
// and a drain then only hand the link to the traffic that keeps the queue.
TEST(BbrTest, TheResponseThatStartsCompetingDoesNotCut) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth share = Bandwidth::Gbps(5);
  FillPipeThenQueue(&d, &bbr, Bandwidth::Gbps(10));
  // MovingQueueRound, ACK by ACK, up to the one that starts competing.
  const ByteCount bytes = share.BytesIn(kRtt.Scaled(1.5)) / 16;
  Bandwidth before;
  for (int i = 0; i < 200 * 16 && !bbr.competing(); ++i) {
    const Duration rtt = kRtt.Scaled(i % 2 == 0 ? 1.5 : 1.6);
    before = bbr.bandwidth();
    d.Ack(rtt / 16, bytes, share, rtt);
  }
  ASSERT_TRUE(bbr.competing());
  EXPECT_GE(bbr.bandwidth().bps(), before.bps());
  EXPECT_NE(bbr.phase(), BbrController::Phase::kDown);
  EXPECT_GE(bbr.pacing_gain(), 1.0);
}

// The longest PROBE_BW UP phase over `rounds` round trips at `rate` and `rtt`, ACK by ACK.
Duration LongestProbe(Driver* d, const BbrController& bbr, Bandwidth rate, Duration rtt,
                      int rounds) {
  constexpr int kAcks = 32;
  const ByteCount bytes = std::max<ByteCount>(rate.BytesIn(rtt) / kAcks, 1);
  Duration longest = Duration::Zero();
  Time start = Time::Infinite();
  for (int i = 0; i < rounds * kAcks; ++i) {
    d->Ack(rtt / kAcks, bytes, rate, rtt);
    const bool up = bbr.mode() == BbrController::Mode::kProbeBw &&
                    bbr.phase() == BbrController::Phase::kUp;
    if (up && start.IsInfinite()) start = d->now();
    if (!up && !start.IsInfinite()) {
      longest = std::max(longest, d->now() - start);
      start = Time::Infinite();
    }
  }
  return longest;
}

// Competing, the probe lasts a min RTT, as BBR's does; where the competitor took the link
// while the flow answered its queue (the model fell below half of what it was at the
// first response, as TCP BBR's startup does to it), it lasts the whole round, queue
// included, for compete.catch_up (10 s) after competing starts.
TEST(BbrTest, ASqueezedFlowProbesWholeRoundsWhileCatchingUp) {
  const Duration queued = kRtt.Scaled(1.5);
  for (const bool squeezed : {false, true}) {
    SCOPED_TRACE(squeezed ? "squeezed" : "kept its share");
    BbrController bbr(BbrConfig());
    Driver d(&bbr);
    FillPipeThenQueue(&d, &bbr, Bandwidth::Gbps(10));
    Bandwidth share = Bandwidth::Gbps(5);
    for (int i = 0; i < 200 && !bbr.competing(); ++i) {
      if (squeezed) share = std::max(share.Scaled(0.95), Bandwidth::Gbps(1));
      MovingQueueRound(&d, share, queued, kRtt.Scaled(1.6));
    }
    ASSERT_TRUE(bbr.competing());
    const Duration first = LongestProbe(&d, bbr, share, queued, 20);
    if (squeezed) {
      EXPECT_GE(first, kRtt.Scaled(1.4));
      EXPECT_LE(first, queued.Scaled(1.1));
    } else {
      EXPECT_LE(first, kRtt.Scaled(1.1));
    }
    // Ten seconds on, BBR's probe.
    while (d.now() < Time::Zero() + Duration::Seconds(30)) d.Round(share, queued);
    EXPECT_LE(LongestProbe(&d, bbr, share, queued, 20), kRtt.Scaled(1.1));
    EXPECT_TRUE(bbr.competing());
  }
}

// TCP BBR beside a newcomer: its queue grows through the newcomer's drains, then stays flat
// between its probes. The flat queue is taken for the path's RTT (the drains stop
// cutting), but it came after drains that moved it, not as a step: the count towards
// competing goes on, and a response after 40 rounds competes (before, the rounds at the
// new RTT counted as an empty queue and the count began again). When the queue gives way
// (TCP BBR's PROBE_RTT), the old RTT is back.
TEST(BbrTest, AFlatQueueAfterAGrowingOneKeepsCountingTowardsCompeting) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth share = Bandwidth::Gbps(5);
  FillPipeThenQueue(&d, &bbr, Bandwidth::Gbps(10));
  int rounds = 0;
  for (; rounds < 12; ++rounds) d.Round(share, kRtt.Scaled(1.3 + 0.05 * rounds));
  EXPECT_GE(bbr.queue_drains(), 3u);
  const Duration flat = kRtt.Scaled(1.9);
  for (; rounds < 40 && bbr.path_rtt_changes() == 0; ++rounds) d.Round(share, flat);
  ASSERT_EQ(bbr.path_rtt_changes(), 1u);
  EXPECT_EQ(bbr.min_rtt(), flat);
  EXPECT_FALSE(bbr.competing());
  for (; rounds < 45; ++rounds) d.Round(share, flat);
  int more = 0;
  for (; more < 40 && !bbr.competing(); ++more) {
    MovingQueueRound(&d, share, flat.Scaled(1.2), flat.Scaled(1.3));
  }
  EXPECT_TRUE(bbr.competing());
  EXPECT_LE(more, 6);
  d.Round(Bandwidth::Gbps(10), kRtt);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
}

// A queue that stands for fewer than 40 rounds at a time and then empties for three
// rounds (longhaul newcomers' startups): drains every time, never competes.
TEST(BbrTest, AQueueThatEmptiesBetweenNewcomersIsNotACompetitor) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  FillTenGbps(&d, &bbr);
  for (int newcomer = 0; newcomer < 6; ++newcomer) {
    for (int i = 0; i < 30; ++i) {
      MovingQueueRound(&d, Bandwidth::Gbps(5), kRtt.Scaled(1.5), kRtt.Scaled(1.6));
    }
    for (int i = 0; i < 3; ++i) d.Round(Bandwidth::Gbps(5), kRtt);
  }
  EXPECT_FALSE(bbr.competing());
  EXPECT_EQ(bbr.competing_entries(), 0u);
  EXPECT_GE(bbr.queue_drains(), 12u);
}

// A loss-based competitor (TCP CUBIC) answers an overflow episode: the queue empties
// after it. The cut (x 0.5) stands, and the model grows back no faster than CUBIC's
// window would with fast convergence: W(t) = 0.4 (t - K)^3 + 0.75 W packets per RTT.
// Without the bound (compete.cubic_c = 0) the model is what the path delivers again
// (here a synthetic path that delivers the share whatever the flow sends).
Bandwidth ModelAfterAnsweredEpisode(double cubic_c, Duration after) {
  BbrParams params;
  params.compete.cubic_c = cubic_c;
  BbrController bbr(BbrConfig(), 1, params);
  Driver d(&bbr);
  const Bandwidth share = Bandwidth::Gbps(5);
  const Duration low = kRtt.Scaled(1.5);
  FillPipeThenQueue(&d, &bbr, Bandwidth::Gbps(10));
  for (int i = 0; i < 200 && !bbr.competing(); ++i) {
    MovingQueueRound(&d, share, low, kRtt.Scaled(1.6));
  }
  EXPECT_TRUE(bbr.competing());
  for (int i = 0; i < 20; ++i) d.Round(share, low);  // loss-free rounds
  d.Loss(10, 8192, low);
  d.Round(share, low);
  d.Round(share, low);
  d.set_in_flight(0);
  const Time cut = d.now();
  while (d.now() - cut < after) d.Round(share, kRtt);  // the queue is gone
  return bbr.bandwidth();
}

TEST(BbrTest, AnAnsweredEpisodeCutsInHalfAndGrowsBackAsCubicWould) {
  const double share = 5e9;
  // W = 5 Gbit/s x 87 ms = 6,600 packets of 8 KiB: the curve starts at 3,300 and levels
  // off at 4,950, K = cbrt(1,650 / 0.4) = 16 s; 0.5 s on, W = 3,460 packets, at 58 ms
  // 3.9 Gbit/s: below the share; 25 s on, above it.
  EXPECT_LE(ModelAfterAnsweredEpisode(0.4, Duration::Zero()).bps(), 0.52 * share);
  const Bandwidth early = ModelAfterAnsweredEpisode(0.4, Duration::Milliseconds(500));
  EXPECT_LT(early.bps(), 0.92 * share);
  EXPECT_GE(early.bps(), 0.5 * share);
  EXPECT_GE(ModelAfterAnsweredEpisode(0, Duration::Milliseconds(500)).bps(), 0.99 * share);
  EXPECT_GE(ModelAfterAnsweredEpisode(0.4, Duration::Seconds(25)).bps(), 0.99 * share);
}

// Random loss on a link whose queue a TCP flow keeps full: every loss comes with
// queueing delay, so the cuts are for loss with a queue; they never empty it either.
TEST(BbrTest, CompetesWhenCutsForLossWithQueueNeverEmptyIt) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(10);
  const Bandwidth share = Bandwidth::Gbps(5);
  FillPipeThenQueue(&d, &bbr, link);
  int rounds = 0;
  for (; rounds < 200 && !bbr.competing(); ++rounds) {
    d.Loss(2, 8192, kRtt.Scaled(1.5));
    MovingQueueRound(&d, share, kRtt.Scaled(1.5), kRtt.Scaled(1.6));
  }
  ASSERT_TRUE(bbr.competing()) << "after " << rounds << " rounds";
  // At least three responses over at least 40 rounds, some of them for loss.
  EXPECT_GE(rounds, 40);
  EXPECT_GE(bbr.congestion_events() + bbr.queue_drains(), 3u);
  EXPECT_GE(bbr.congestion_events(), 1u);
  // Loss in every round, far below 8 x cc_loss_threshold: no more cuts.
  const uint64_t events = bbr.congestion_events() + bbr.queue_drains();
  for (int i = 0; i < 30; ++i) {
    d.Loss(2, 8192, kRtt.Scaled(1.5));
    d.Round(share, kRtt.Scaled(1.5));
  }
  EXPECT_EQ(bbr.congestion_events() + bbr.queue_drains(), events);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * share.bps());
}

// With cc_compete off, or cc_yield on (whatever cc_compete says), the flow never
// competes: it answers the queue every few rounds for as long as it stands.
class YieldTest : public ::testing::TestWithParam<bool> {};

TEST_P(YieldTest, YieldsToAStandingQueue) {
  TransportConfig c = BbrConfig();
  if (GetParam()) {
    c.cc_yield = true;  // with cc_compete at its default, on
    EXPECT_TRUE(c.cc_compete);
  } else {
    c.cc_compete = false;
  }
  BbrController bbr(c);
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(10);
  FillPipeThenQueue(&d, &bbr, link);
  double lowest_gain = 1;
  for (int i = 0; i < 100; ++i) {
    MovingQueueRound(&d, Bandwidth::Gbps(5), kRtt.Scaled(1.5), kRtt.Scaled(1.6));
    lowest_gain = std::min(lowest_gain, bbr.pacing_gain());
  }
  EXPECT_FALSE(bbr.competing());
  EXPECT_EQ(bbr.competing_entries(), 0u);
  // It keeps answering the queue: a deep drain (gain 0.5) every few rounds; the queue
  // moves, so it is not taken for the path's RTT.
  EXPECT_GE(bbr.queue_drains(), 10u);
  EXPECT_NEAR(lowest_gain, 0.5, 1e-9);
  EXPECT_EQ(bbr.path_rtt_changes(), 0u);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
}

INSTANTIATE_TEST_SUITE_P(CompeteOffOrYield, YieldTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Yield" : "CompeteOff"; });

// The path's RTT steps from 58 to 87 ms (a route change) while the flow fills the link:
// the first drains see a flat RTT they cannot lower; after two of them that RTT is the
// min RTT, the model is what it was before the drains, and the drains stop.
TEST(BbrTest, APathRttStepIsTakenAsTheMinRttAfterTwoFlatDrains) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  const double bw_before = bbr.bandwidth().bps();
  const Duration new_rtt = kRtt.Scaled(1.5);
  int rounds = 0;
  for (; rounds < 30 && bbr.path_rtt_changes() == 0; ++rounds) d.Round(link, new_rtt);
  ASSERT_EQ(bbr.path_rtt_changes(), 1u) << "after " << rounds << " rounds";
  // One drain that counts as the reference and two that did not move the RTT.
  EXPECT_EQ(bbr.queue_drains(), 2u);
  EXPECT_LE(rounds, 12);
  EXPECT_EQ(bbr.min_rtt(), new_rtt);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * bw_before);
  EXPECT_NE(bbr.phase(), BbrController::Phase::kDown);
  const uint64_t drains = bbr.queue_drains();
  for (int i = 0; i < 40; ++i) d.Round(link, new_rtt);
  EXPECT_EQ(bbr.queue_drains(), drains);
  EXPECT_EQ(bbr.path_rtt_changes(), 1u);
  EXPECT_GE(bbr.bandwidth().bps(), 0.99 * bw_before);
  EXPECT_GE(bbr.PacingRate().bps(), 0.95 * bw_before);
}

// A flat queue taken for the path's RTT (TCP BBR keeps one flat between its probes) gives
// way to the old RTT when the competitor empties it (its PROBE_RTT): a competitor was
// there, and the next response to a queue starts competing, not 40 rounds later.
TEST(BbrTest, APathRttThatGivesWayToTheOldOneWasACompetitor) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  const Bandwidth share = Bandwidth::Gbps(5);
  for (int i = 0; i < 30 && bbr.path_rtt_changes() == 0; ++i) d.Round(share, kRtt.Scaled(1.5));
  ASSERT_EQ(bbr.path_rtt_changes(), 1u);
  EXPECT_EQ(bbr.min_rtt(), kRtt.Scaled(1.5));
  d.Round(link, kRtt);  // the queue empties for a round
  EXPECT_EQ(bbr.min_rtt(), kRtt);
  EXPECT_FALSE(bbr.competing());
  int rounds = 0;
  for (; rounds < 40 && !bbr.competing(); ++rounds) {
    MovingQueueRound(&d, share, kRtt.Scaled(1.5), kRtt.Scaled(1.6));
  }
  EXPECT_TRUE(bbr.competing());
  EXPECT_LT(rounds, 10);
}

// Competing with a competitor that ignores loss (TCP BBR: its flat queue gave way in
// its PROBE_RTT, then an overflow episode went unanswered): the window is 3 BDPs and the
// probe the fair one, here (0.3 Gbit/s x 58 ms, ~270 packets) its cap 1.75; before the
// unanswered episode, BBR's 1.25.
TEST(BbrTest, AgainstACompetitorThatIgnoresLossTheProbeIsTheFairOne) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  const Bandwidth share = Bandwidth::Mbps(300);
  const Duration queued = kRtt.Scaled(1.5);
  for (int i = 0; i < 30 && bbr.path_rtt_changes() == 0; ++i) d.Round(share, queued);
  ASSERT_EQ(bbr.path_rtt_changes(), 1u);
  d.Round(link, kRtt);  // the flat queue gives way
  for (int i = 0; i < 40 && !bbr.competing(); ++i) {
    MovingQueueRound(&d, share, queued, kRtt.Scaled(1.6));
  }
  ASSERT_TRUE(bbr.competing());
  auto max_gain_over = [&](int rounds) {
    double g = 0;
    for (int i = 0; i < rounds; ++i) {
      d.Round(share, queued);
      g = std::max(g, bbr.DebugState().pacing_gain);
    }
    return g;
  };
  EXPECT_NEAR(max_gain_over(20), 1.25, 1e-9);
  // Sixteen loss-free rounds (above), a loss, and the queue stays: not answered.
  d.Loss(5, 8192, queued);
  EXPECT_NEAR(max_gain_over(20), 1.75, 1e-9);
  const double bdp = static_cast<double>(bbr.bandwidth().BytesIn(bbr.min_rtt()));
  EXPECT_GE(static_cast<double>(bbr.CongestionWindow()), 2.9 * bdp);
  EXPECT_TRUE(bbr.competing());
}

// After a real route change the old RTT does not come back: no competitor, and a queue
// after it is drained as before.
TEST(BbrTest, ARouteChangeThatHoldsIsNoCompetitor) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  const Duration path = kRtt.Scaled(1.5);
  for (int i = 0; i < 30 && bbr.path_rtt_changes() == 0; ++i) d.Round(link, path);
  ASSERT_EQ(bbr.path_rtt_changes(), 1u);
  for (int i = 0; i < 20; ++i) d.Round(link, path);
  const uint64_t drains = bbr.queue_drains();
  for (int i = 0; i < 30; ++i) MovingQueueRound(&d, Bandwidth::Gbps(5), path.Scaled(1.5), path.Scaled(1.6));
  EXPECT_FALSE(bbr.competing());
  EXPECT_GE(bbr.queue_drains(), drains + 3);
}

// cc_yield: the same flat step is drained again and again, never taken for the path.
TEST(BbrTest, YieldModeNeverTakesAFlatQueueForThePathRtt) {
  TransportConfig c = BbrConfig();
  c.cc_yield = true;
  BbrController bbr(c);
  Driver d(&bbr);
  const Bandwidth link = FillTenGbps(&d, &bbr);
  for (int i = 0; i < 60; ++i) d.Round(link, kRtt.Scaled(1.5));
  EXPECT_EQ(bbr.path_rtt_changes(), 0u);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
  EXPECT_GE(bbr.queue_drains(), 6u);
}

// A queue that keeps growing through the drains (other traffic filling the buffer) is
// not a path change, however flat each round is.
TEST(BbrTest, AGrowingQueueIsNotTakenForThePathRtt) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(10);
  FillPipeThenQueue(&d, &bbr, link);
  for (int i = 0; i < 40; ++i) d.Round(Bandwidth::Gbps(5), kRtt.Scaled(1.3 + 0.05 * i));
  EXPECT_GE(bbr.queue_drains(), 5u);
  EXPECT_EQ(bbr.path_rtt_changes(), 0u);
  EXPECT_EQ(bbr.min_rtt(), kRtt);
}

}  // namespace
}  // namespace longhaul::bbr_testing
