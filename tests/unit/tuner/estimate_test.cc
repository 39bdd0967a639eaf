// Estimators on synthetic traces with known parameters: seeded generators (a
// Gilbert-Elliott chain, the link model of transport/sim driven packet by packet) whose
// true parameters the estimates must recover within sampling error.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"
#include "transport/sim/link_model.h"
#include "transport/sim/link_spec.h"
#include "tuner/estimate/loss_fit.h"
#include "tuner/estimate/pmtu_search.h"
#include "tuner/estimate/rate.h"
#include "tuner/estimate/reorder.h"
#include "tuner/estimate/rtt_stats.h"

namespace longhaul::tuner {
namespace {

// A Gilbert-Elliott trace: Good loses with probability 1-k, Bad with 1-h; Good->Bad p,
// Bad->Good r. Starts in the stationary distribution.
std::vector<uint8_t> GilbertElliottTrace(uint64_t n, double p, double r, double h, double k,
                                         uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> out(n);
  bool bad = rng.Uniform() < p / (p + r);
  for (uint64_t i = 0; i < n; ++i) {
    const double receive = bad ? h : k;
    out[i] = rng.Uniform() < receive ? 0 : 1;
    bad = bad ? !(rng.Uniform() < r) : rng.Uniform() < p;
  }
  return out;
}

// ---- RTT ----

TEST(RttStatsTest, OrderStatisticsOfAKnownSet) {
  std::vector<Duration> v;
  for (int i = 100; i >= 1; --i) v.push_back(Duration::Milliseconds(i));  // 1..100 ms
  absl::StatusOr<RttSummary> s = SummarizeRtt(v);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->count, 100u);
  EXPECT_EQ(s->min, Duration::Milliseconds(1));
  EXPECT_EQ(s->p50, Duration::Milliseconds(50));
  EXPECT_EQ(s->p90, Duration::Milliseconds(90));
  EXPECT_EQ(s->p99, Duration::Milliseconds(99));
  EXPECT_EQ(s->max, Duration::Milliseconds(100));
  EXPECT_EQ(s->mean, Duration::Microseconds(50500));
  EXPECT_EQ(s->mean_deviation, Duration::Milliseconds(25));
  EXPECT_EQ(s->jitter, Duration::Milliseconds(49));
  EXPECT_EQ(*RttPercentile(v, 0.25), Duration::Milliseconds(25));
}

TEST(RttStatsTest, RecoversPropagationDelayAndJitterOfASyntheticPath) {
  // 58 ms propagation plus a uniform [0, 2 ms] delay: min -> 58 ms, p50 -> 59 ms,
  // p99 -> 59.98 ms, jitter (p99 - p50) -> 0.98 ms.
  Rng rng(7);
  std::vector<Duration> v;
  for (int i = 0; i < 20000; ++i) {
    v.push_back(Duration::Milliseconds(58) +
                Duration::Nanoseconds(static_cast<int64_t>(rng.Uniform() * 2e6)));
  }
  RttSummary s = *SummarizeRtt(v);
  EXPECT_NEAR(s.min.milliseconds(), 58.0, 0.01);
  EXPECT_NEAR(s.p50.milliseconds(), 59.0, 0.05);
  EXPECT_NEAR(s.p99.milliseconds(), 59.98, 0.02);
  EXPECT_NEAR(s.jitter.milliseconds(), 0.98, 0.06);
  EXPECT_NEAR(s.mean_deviation.milliseconds(), 0.5, 0.02);  // E|U - 1/2| = 1/4 of 2 ms
}

TEST(RttStatsTest, RejectsEmptyAndNegative) {
  EXPECT_FALSE(SummarizeRtt({}).ok());
  std::vector<Duration> bad = {Duration::Milliseconds(1), Duration::Nanoseconds(-5)};
  EXPECT_FALSE(SummarizeRtt(bad).ok());
  EXPECT_FALSE(RttPercentile({}, 0.5).ok());
}

// ---- loss ----

TEST(LossFitTest, CountsOfASmallTrace) {
  std::vector<uint8_t> t = {0, 1, 1, 0, 1, 0, 0, 1, 1, 1};
  LossCounts c = CountLosses(t);
  EXPECT_EQ(c.packets, 10u);
  EXPECT_EQ(c.lost, 6u);
  EXPECT_EQ(c.bursts, 3u);
  EXPECT_EQ(c.n0x, 4u);  // pairs starting at 0: (0,1) (0,1) (0,0) (0,1)
  EXPECT_EQ(c.n01, 3u);
  EXPECT_EQ(c.n1x, 5u);  // (1,1) (1,0) (1,0) (1,1) (1,1)
  EXPECT_EQ(c.n11, 3u);
  EXPECT_EQ(c.triples, 8u);
  EXPECT_EQ(c.n1x1, 2u);  // triples 1?1 start at t=2 (1,0,1) and t=7 (1,1,1)
  EXPECT_EQ(c.n111, 1u);
  EXPECT_DOUBLE_EQ(c.mean_burst(), 2.0);
}

TEST(LossFitTest, TwoParameterFitRecoversGilbertParameters) {
  // Reference B4 checked (0.002, 0.4) on 2 M packets; same here with a seeded chain.
  struct Case { double p, r; };
  for (Case tc : {Case{0.002, 0.4}, Case{0.001, 1.0 - 0.001}, Case{0.02, 0.1}, Case{1e-3, 0.5}}) {
    SCOPED_TRACE(testing::Message() << "p=" << tc.p << " r=" << tc.r);
    std::vector<uint8_t> t = GilbertElliottTrace(2'000'000, tc.p, tc.r, 0.0, 1.0, 42);
    LossCounts c = CountLosses(t);
    GilbertFit f = FitGilbert2(c);
    // Relative error ~ 1/sqrt(events): >= 800 bursts here, so 4 sigma < 15 %.
    EXPECT_NEAR(f.p, tc.p, 0.15 * tc.p);
    EXPECT_NEAR(f.r, tc.r, 0.15 * tc.r);
    const double loss = tc.p / (tc.p + tc.r);
    EXPECT_NEAR(c.loss_rate(), loss, 0.15 * loss);
    EXPECT_NEAR(c.mean_burst(), 1.0 / tc.r, 0.15 / tc.r);
    EXPECT_NEAR(f.loss_rate(), loss, 0.15 * loss);
  }
}

TEST(LossFitTest, ThreeParameterFitRecoversLossInBadState) {
  // Reference B4: (p, r, h) = (0.005, 0.3, 0.2) estimated as (0.0049, 0.304, 0.200).
  std::vector<uint8_t> t = GilbertElliottTrace(4'000'000, 0.005, 0.3, 0.2, 1.0, 9);
  LossCounts c = CountLosses(t);
  GilbertFit f = FitGilbert3(c);
  ASSERT_TRUE(f.three_parameter) << f.note;
  EXPECT_NEAR(f.p, 0.005, 0.001);
  EXPECT_NEAR(f.r, 0.3, 0.04);
  EXPECT_NEAR(f.h, 0.2, 0.04);
  EXPECT_NEAR(f.loss_rate(), c.loss_rate(), 0.1 * c.loss_rate());
  // The 2-parameter fit of the same trace sees shorter runs (h breaks them up) and so a
  // larger r: it cannot tell "leaves Bad" from "received while in Bad".
  GilbertFit two = FitGilbert2(c);
  EXPECT_GT(two.r, f.r);
}

TEST(LossFitTest, ThreeParameterFitOfASimpleGilbertChainHasNoBadStateReceptions) {
  std::vector<uint8_t> t = GilbertElliottTrace(4'000'000, 0.002, 0.25, 0.0, 1.0, 11);
  GilbertFit f = FitGilbert3(CountLosses(t));
  ASSERT_TRUE(f.three_parameter) << f.note;
  EXPECT_NEAR(f.h, 0.0, 0.03);
  EXPECT_NEAR(f.r, 0.25, 0.03);
  EXPECT_NEAR(f.p, 0.002, 0.0003);
}

TEST(LossFitTest, ThreeParameterFitFallsBackOnDegenerateTraces) {
  GilbertFit none = FitGilbert3(CountLosses(std::vector<uint8_t>(1000, 0)));
  EXPECT_FALSE(none.three_parameter);
  EXPECT_EQ(none.p, 0.0);
  EXPECT_EQ(none.r, 1.0);
  EXPECT_FALSE(none.note.empty());
  // Isolated single losses, never two apart: no 1x1 triples.
  std::vector<uint8_t> sparse(1000, 0);
  for (int i = 0; i < 1000; i += 10) sparse[i] = 1;
  GilbertFit f = FitGilbert3(CountLosses(sparse));
  EXPECT_FALSE(f.three_parameter);
  EXPECT_NEAR(f.r, 1.0, 1e-12);
  EXPECT_NEAR(f.loss_rate(), 0.1, 0.01);
}

TEST(LossFitTest, BurstRatioIsOneForBernoulliAndMeanBurstTimesOneMinusLossOtherwise) {
  std::vector<uint8_t> bern = GilbertElliottTrace(2'000'000, 0.01, 0.99, 0.0, 1.0, 3);
  EXPECT_NEAR(BurstRatio(CountLosses(bern)), 1.0, 0.03);
  std::vector<uint8_t> bursty = GilbertElliottTrace(2'000'000, 0.001, 0.125, 0.0, 1.0, 5);
  LossCounts c = CountLosses(bursty);
  EXPECT_NEAR(BurstRatio(c), 8.0 * (1 - c.loss_rate()), 0.8);
  EXPECT_EQ(BurstRatio(CountLosses(std::vector<uint8_t>(10, 0))), 0.0);
}

TEST(LossFitTest, EstimateReportsConfidenceFromLossEvents) {
  std::vector<uint8_t> t = GilbertElliottTrace(400'000, 0.0001, 0.9999, 0.0, 1.0, 8);
  LossEstimate e = EstimateLoss(CountLosses(t));
  ASSERT_GT(e.bursts, 10u);
  EXPECT_NEAR(e.loss_rate_rel_error, 2.0 / std::sqrt(static_cast<double>(e.bursts)), 1e-12);
  LossEstimate none = EstimateLoss(CountLosses(std::vector<uint8_t>(30000, 0)));
  EXPECT_EQ(none.loss_rate, 0.0);
  EXPECT_EQ(none.mean_burst, 1.0);
  EXPECT_NEAR(none.loss_rate_upper_if_none, 1e-4, 1e-12);
  EXPECT_FALSE(none.ToString().empty());
}

TEST(LossFitTest, LinkModelGilbertLossIsRecovered) {
  // The link model (the simulator's and the emulator's) with loss=1e-2, burst=4: the
  // trace of offered packets gives back its loss rate and mean burst.
  absl::StatusOr<sim::LinkSpec> spec =
      sim::ParseLinkSpec("rate=100gbit,rtt=0,loss=1e-2,burst=4,queue=1GB", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  sim::LinkDirection link(*spec, 99);
  LossCounter counter;
  Time now;
  for (int i = 0; i < 1'000'000; ++i) {
    now += Duration::Nanoseconds(100);
    counter.Add(link.Offer(now, 1000, false).drop == sim::DropReason::kLoss);
  }
  LossEstimate e = EstimateLoss(counter.counts());
  EXPECT_NEAR(e.loss_rate, 1e-2, 0.1e-2);
  EXPECT_NEAR(e.mean_burst, 4.0, 0.4);
  EXPECT_NEAR(e.gilbert2.r, 0.25, 0.025);
}

// ---- reorder ----

TEST(ReorderTest, InOrderArrivalsAreNotReordered) {
  ReorderTracker t;
  for (uint64_t i = 0; i < 1000; ++i) t.OnArrival(i, Time::FromNanoseconds(i * 1000));
  EXPECT_EQ(t.estimate().reordered, 0u);
  EXPECT_EQ(t.estimate().packets, 1000u);
  // Gaps (losses) are not reordering.
  ReorderTracker gaps;
  for (uint64_t i = 0; i < 1000; i += 3) gaps.OnArrival(i, Time::FromNanoseconds(i));
  EXPECT_EQ(gaps.estimate().reordered, 0u);
}

TEST(ReorderTest, HeldBackPacketReportsExtentAndLateness) {
  // Packet 10 is held back and arrives after 11..15 (5 packets, 1 us apart).
  ReorderTracker t;
  std::vector<uint64_t> order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 10, 16};
  for (size_t i = 0; i < order.size(); ++i) {
    t.OnArrival(order[i], Time::FromNanoseconds(static_cast<int64_t>(i) * 1000));
  }
  EXPECT_EQ(t.estimate().reordered, 1u);
  EXPECT_EQ(t.estimate().max_extent_packets, 5u);
  EXPECT_EQ(t.estimate().max_late, Duration::Microseconds(5));
}

TEST(ReorderTest, LinkModelReorderDelayIsRecovered) {
  // reorder=1e-3 with reorder_delay=1ms at 1 Gbit/s and 1250-byte packets (10 us apart):
  // a held-back packet is overtaken by ~100 packets and arrives ~1 ms late.
  absl::StatusOr<sim::LinkSpec> spec =
      sim::ParseLinkSpec("rate=1gbit,rtt=10ms,reorder=1e-3,reorder_delay=1ms,overhead=0", {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  sim::LinkDirection link(*spec, 5);
  struct Arrival { Time at; uint64_t seq; };
  std::vector<Arrival> arrivals;
  Time now;
  for (uint64_t i = 0; i < 200'000; ++i) {
    sim::Verdict v = link.Offer(now, 1250, false);
    if (!v.dropped()) arrivals.push_back({v.deliver_at, i});
    now += Duration::Microseconds(10);
  }
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const Arrival& a, const Arrival& b) { return a.at < b.at; });
  ReorderTracker t;
  for (const Arrival& a : arrivals) t.OnArrival(a.seq, a.at);
  const ReorderEstimate& e = t.estimate();
  EXPECT_NEAR(e.reordered_fraction(), 1e-3, 0.3e-3);
  EXPECT_NEAR(static_cast<double>(e.max_extent_packets), 100, 2);
  EXPECT_NEAR(e.max_late.milliseconds(), 1.0, 0.011);
}

// ---- rate ----

// Sends a train at `rate` through `link`: `n` packets of `bytes` (UDP payload), paced
// evenly from `start`. Returns the result as the prober would see it.
TrainResult RunTrain(sim::LinkDirection& link, Time start, Bandwidth rate, int n, size_t bytes,
                     Time* end) {
  const ByteCount wire = bytes + link.spec().overhead;
  const Duration gap = rate.TransferTime(wire);
  TrainReceipt receipt;
  std::vector<Time> arrivals;
  Time t = start;
  for (int i = 0; i < n; ++i) {
    sim::Verdict v = link.Offer(t, bytes, false);
    if (!v.dropped()) arrivals.push_back(v.deliver_at);
    if (i + 1 < n) t += gap;
  }
  std::sort(arrivals.begin(), arrivals.end());
  for (Time a : arrivals) receipt.Add(wire, a);
  TrainResult r;
  r.target_rate = rate;
  r.duration = t - start;
  r.send_rate = Bandwidth::FromBytesAndDuration(wire * (n - 1), t - start);
  r.delivery_rate = receipt.DeliveryRate();
  r.packets_sent = n;
  r.packets_received = receipt.packets;
  *end = arrivals.empty() ? t : std::max(t, arrivals.back());
  return r;
}

TEST(RateTest, DeliveryRateOfATrainAboveTheBottleneckIsTheBottleneck) {
  sim::LinkSpec spec = *sim::ParseLinkSpec("rate=1gbit,rtt=20ms", {});
  sim::LinkDirection link(spec, 1);
  Time end;
  TrainResult r = RunTrain(link, Time::Zero(), Bandwidth::Gbps(3), 200, 1472, &end);
  EXPECT_NEAR(r.delivery_rate.bps(), 1e9, 1e9 * 1e-3);
  EXPECT_NEAR(r.send_rate.bps(), 3e9, 3e9 * 1e-3);
  // Below the bottleneck a train arrives at the rate it was sent.
  sim::LinkDirection idle(spec, 1);
  TrainResult slow = RunTrain(idle, Time::Zero(), Bandwidth::Mbps(400), 200, 1472, &end);
  EXPECT_NEAR(slow.delivery_rate.bps(), 4e8, 4e8 * 1e-3);
}

TEST(RateTest, TrainReceiptNeedsTwoPackets) {
  TrainReceipt r;
  EXPECT_TRUE(r.DeliveryRate().IsZero());
  r.Add(1000, Time::FromNanoseconds(5));
  EXPECT_TRUE(r.DeliveryRate().IsZero());
  r.Add(1000, Time::FromNanoseconds(8005));
  EXPECT_DOUBLE_EQ(r.DeliveryRate().bps(), 1e9);
}

TEST(RateTest, SearchFindsTheBottleneckWithFullPipeDetection) {
  for (const char* s : {"rate=100mbit,rtt=58ms,loss=1e-3", "rate=2gbit,rtt=5ms,loss=2e-2,burst=10",
                        "rate=37mbit,rtt=150ms", "rate=400gbit,rtt=10ms"}) {
    SCOPED_TRACE(s);
    sim::LinkSpec spec = *sim::ParseLinkSpec(s, {});
    sim::LinkDirection link(spec, 3);
    RateSearchOptions opt;
    opt.max_rate = Bandwidth::Gbps(1000);
    RateSearch search(opt);
    Time now;
    int trains = 0;
    while (!search.done() && trains < 100) {
      // 20 ms trains (at least 64 packets) separated by an RTT, like the prober.
      const Bandwidth rate = search.NextRate();
      const size_t bytes = 8972;
      const int n = std::max<int>(64, static_cast<int>(rate.BytesIn(Duration::Milliseconds(20)) /
                                                       (bytes + 28)));
      Time end;
      search.OnTrain(RunTrain(link, now, rate, n, bytes, &end));
      now = end + spec.rtt;
      ++trains;
    }
    ASSERT_TRUE(search.done());
    EXPECT_EQ(search.stop_reason(), "full pipe");
    EXPECT_TRUE(search.saturated());
    EXPECT_NEAR(search.Estimate().bps(), spec.rate.bps(), 0.01 * spec.rate.bps());
    EXPECT_LE(trains, 20);
    // Full pipe needs 3 trains without 25 % growth after the best: never more than 4
    // trains at or above the bottleneck.
    int above = 0;
    for (const TrainResult& t : search.trains()) above += t.target_rate >= spec.rate;
    EXPECT_LE(above, 4);
  }
}

TEST(RateTest, SearchStopsAtMaxRateAndWhenTheSenderCannotKeepUp) {
  RateSearchOptions opt;
  opt.start_rate = Bandwidth::Gbps(1);
  opt.max_rate = Bandwidth::Gbps(3);
  RateSearch capped(opt);
  int n = 0;
  while (!capped.done() && n++ < 10) {
    TrainResult t;
    t.target_rate = t.send_rate = t.delivery_rate = capped.NextRate();
    t.packets_sent = t.packets_received = 100;
    capped.OnTrain(t);
  }
  EXPECT_EQ(capped.stop_reason(), "max rate");
  EXPECT_FALSE(capped.saturated());
  EXPECT_DOUBLE_EQ(capped.Estimate().bps(), 3e9);  // a lower bound

  RateSearch slow_sender(RateSearchOptions{});
  n = 0;
  while (!slow_sender.done() && n++ < 30) {
    TrainResult t;
    t.target_rate = slow_sender.NextRate();
    t.send_rate = t.delivery_rate = std::min(t.target_rate, Bandwidth::Mbps(300));
    t.packets_sent = t.packets_received = 100;
    slow_sender.OnTrain(t);
  }
  EXPECT_EQ(slow_sender.stop_reason(), "sender limited");
  EXPECT_FALSE(slow_sender.saturated());
}

TEST(RateTest, EstimateResistsStretchedAndCompressedTrains) {
  // A 100 Mbit/s bottleneck seen through a noisy host: an early train that looked
  // saturated (stretched), one compressed train (arrived faster than it was sent), then
  // saturated trains at the true rate.
  RateSearch s;
  auto train = [](double target, double sent, double delivered) {
    TrainResult t;
    t.target_rate = Bandwidth::Mbps(target);
    t.send_rate = Bandwidth::Mbps(sent);
    t.delivery_rate = Bandwidth::Mbps(delivered);
    t.packets_sent = t.packets_received = 100;
    return t;
  };
  s.OnTrain(train(50, 50, 50));
  s.OnTrain(train(100, 100, 88));   // stretched: looks saturated at 88
  EXPECT_NEAR(s.NextRate().bps(), 1.25 * 88e6, 1e3);
  s.OnTrain(train(110, 110, 109));  // not saturated: the ramp resumes (x2)
  EXPECT_NEAR(s.NextRate().bps(), 220e6, 1e3);
  s.OnTrain(train(220, 180, 230));  // compressed: faster than sent, not the best
  EXPECT_LT(s.MaxDelivery().bps(), 200e6);
  s.OnTrain(train(220, 220, 100));
  s.OnTrain(train(137, 137, 100.5));
  s.OnTrain(train(137, 137, 99.5));
  s.OnTrain(train(137, 137, 100));
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s.stop_reason(), "full pipe");
  EXPECT_NEAR(s.Estimate().bps(), 100e6, 1e6);
}

// ---- PMTU ----

// Runs the search against a path that confirms sizes <= mtu (with `loss` per probe).
PmtuSearch RunPmtu(uint32_t mtu, uint32_t local_max, double loss, uint64_t seed) {
  PmtuSearchOptions o;
  o.max_size = local_max;
  PmtuSearch s(o);
  Rng rng(seed);
  for (int guard = 0; guard < 20 && !s.done(); ++guard) {
    std::vector<std::pair<uint32_t, bool>> results;
    for (uint32_t size : s.NextRound()) {
      bool ok = false;
      for (int copy = 0; copy < 3; ++copy) ok |= size <= mtu && !rng.Bernoulli(loss);
      results.push_back({size, ok});
    }
    s.OnRound(results);
  }
  return s;
}

TEST(PmtuSearchTest, FindsTheExactMtu) {
  for (uint32_t mtu : {68u, 576u, 1280u, 1500u, 4096u, 8999u, 9000u, 65535u}) {
    SCOPED_TRACE(mtu);
    PmtuSearch s = RunPmtu(mtu, 65535, 0.0, 1);
    EXPECT_TRUE(s.done());
    EXPECT_EQ(s.pmtu(), mtu);
    EXPECT_LE(s.rounds(), 5);
  }
  // The local interface is the limit.
  EXPECT_EQ(RunPmtu(65535, 9000, 0.0, 1).pmtu(), 9000u);
  // 2 % loss per probe with three copies per size: still exact.
  EXPECT_EQ(RunPmtu(1500, 65535, 0.02, 4).pmtu(), 1500u);
}

TEST(PmtuSearchTest, NothingConfirmedMeansNoMtu) {
  PmtuSearch s = RunPmtu(20, 65535, 0.0, 1);  // below every probe size
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.pmtu(), 0u);
}

TEST(PmtuSearchTest, ALossyFailureBelowAConfirmedSizeIsForgotten) {
  PmtuSearchOptions o;
  o.max_size = 10000;
  PmtuSearch s(o);
  s.OnRound({{1500, false}});  // a lost probe
  EXPECT_EQ(s.smallest_failed(), 1500u);
  s.OnRound({{1400, true}, {3000, true}, {9000, false}});
  EXPECT_EQ(s.pmtu(), 3000u);
  EXPECT_EQ(s.smallest_failed(), 9000u);
  for (uint32_t size : s.NextRound()) {
    EXPECT_GT(size, 3000u);
    EXPECT_LT(size, 9000u);
  }
}

}  // namespace
}  // namespace longhaul::tuner
