// The prober's phase decisions without sockets or clocks: the RTT phase's echo schedule,
// straggler wait and verdict, and the rate phase's trains, its answers to missing and
// empty reports and its outcome, fed synthetic samples and times.
#include "tuner/probe/probe_phases.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::tuner::probe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kStart = 1'000'000'000;
constexpr int64_t kMs = 1'000'000;

// ---- RTT phase ----

TEST(RttPhaseTest, SendsTheProbesAtTheSpacingUntilTheCount) {
  RttPhase phase(3, Duration::Milliseconds(5), kStart);
  std::vector<int64_t> due;
  while (std::optional<int64_t> t = phase.NextSendNs(kStart + 1000 * kMs)) {
    due.push_back(*t);
    phase.OnSent(100 + due.size());
  }
  EXPECT_THAT(due, ElementsAre(kStart, kStart + 5 * kMs, kStart + 10 * kMs));
  EXPECT_EQ(phase.sent(), 3);
}

TEST(RttPhaseTest, StopsSendingAtTheSendShare) {
  RttPhase phase(40, Duration::Milliseconds(5), kStart);
  int sent = 0;
  while (phase.NextSendNs(kStart + 12 * kMs)) phase.OnSent(sent++);
  EXPECT_EQ(sent, 3);  // due at 0, 5 and 10 ms; 15 ms is past the share
}

TEST(RttPhaseTest, SummarizesTheAnsweredEchoesAndWaitsForTheRest) {
  RttPhase phase(3, Duration::Milliseconds(5), kStart);
  for (uint64_t id : {7, 8, 9}) phase.OnSent(id);
  phase.OnReply(7, Duration::Milliseconds(30));
  phase.OnReply(9, Duration::Milliseconds(10));
  EXPECT_FALSE(phase.AllAnswered());
  phase.OnReply(8, Duration::Milliseconds(20));
  EXPECT_TRUE(phase.AllAnswered());
  absl::StatusOr<RttSummary> s = phase.Verdict("198.18.0.2:5201");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->count, 3u);
  EXPECT_EQ(s->min, Duration::Milliseconds(10));
  EXPECT_EQ(s->p50, Duration::Milliseconds(20));
}

TEST(RttPhaseTest, RepliesToOtherEchoesDoNotCountInTheSummary) {
  RttPhase phase(2, Duration::Milliseconds(5), kStart);
  phase.OnSent(1);
  phase.OnSent(2);
  phase.OnReply(1, Duration::Milliseconds(40));
  phase.OnReply(99, Duration::Milliseconds(1));  // not this phase's
  absl::StatusOr<RttSummary> s = phase.Verdict("t");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->count, 1u);
  EXPECT_EQ(s->min, Duration::Milliseconds(40));
}

TEST(RttPhaseTest, NoEchoBackIsUnavailableNamingTheTarget) {
  RttPhase phase(2, Duration::Milliseconds(5), kStart);
  phase.OnSent(1);
  phase.OnSent(2);
  absl::StatusOr<RttSummary> s = phase.Verdict("198.18.0.2:5201");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsUnavailable(s.status()));
  EXPECT_THAT(s.status().message(), HasSubstr("none of 2 echoes came back from 198.18.0.2:5201"));
}

TEST(RttPhaseTest, StragglerWaitIsThreeLongestRttsBetween200msAnd2s) {
  const int64_t now = kStart + 500 * kMs;
  const int64_t far = kStart + 100'000 * kMs;
  RttPhase phase(3, Duration::Milliseconds(5), kStart);
  EXPECT_EQ(phase.StragglerDeadlineNs(now, far), now + 200 * kMs);  // nothing seen yet
  phase.OnReply(1, Duration::Milliseconds(50));
  EXPECT_EQ(phase.StragglerDeadlineNs(now, far), now + 200 * kMs);  // 150 ms < 200 ms
  phase.OnReply(2, Duration::Milliseconds(100));
  EXPECT_EQ(phase.StragglerDeadlineNs(now, far), now + 300 * kMs);
  phase.OnReply(3, Duration::Seconds(1));
  EXPECT_EQ(phase.StragglerDeadlineNs(now, far), now + 2000 * kMs);           // capped at 2 s
  EXPECT_EQ(phase.StragglerDeadlineNs(now, now + 10 * kMs), now + 10 * kMs);  // phase end
}

// ---- rate phase ----

RatePhaseOptions RateOptions(uint32_t local_mtu = 9000, uint32_t max_mtu = 0) {
  RatePhaseOptions o;
  o.target = "198.18.0.2:5201";
  o.start_rate = Bandwidth::Mbps(50);
  o.max_rate = Bandwidth::Gbps(100);
  o.train_duration = Duration::Milliseconds(40);
  o.local_mtu = local_mtu;
  o.max_mtu = max_mtu;
  return o;
}

// What a responder reports of a train through a bottleneck of `bottleneck`: every packet
// arrives, spaced at the smaller of the send rate and the bottleneck.
TrainReport Through(const TrainPlan& plan, Bandwidth send_rate, Bandwidth bottleneck) {
  TrainReport r;
  r.packets = plan.packets;
  r.wire_bytes = plan.wire_bytes();
  r.first_wire_bytes = plan.payload + kIpUdpOverhead;
  r.fit_rate_bps = static_cast<uint64_t>(std::min(send_rate.bps(), bottleneck.bps()));
  return r;
}

TEST(RatePhaseTest, DatagramSizesFollowTheMtuCap) {
  EXPECT_THAT(RatePhase(RateOptions(9000)).payload_sizes(), ElementsAre(8972, 1472, 1172));
  EXPECT_THAT(RatePhase(RateOptions(1500)).payload_sizes(), ElementsAre(1472, 1172));
  EXPECT_THAT(RatePhase(RateOptions(0)).payload_sizes(), ElementsAre(1472, 1172));  // unknown
  EXPECT_THAT(RatePhase(RateOptions(9000, 1400)).payload_sizes(), ElementsAre(1172));
  EXPECT_THAT(RatePhase(RateOptions(9000, 1000)).payload_sizes(), ElementsAre(972));
  EXPECT_THAT(RatePhase(RateOptions(9000, 50)).payload_sizes(), ElementsAre(68));  // 96 floor
}

TEST(RatePhaseTest, FirstTrainIsAtTheStartRateAtLeast64PacketsWithItsWait) {
  RatePhase phase(RateOptions(1500));
  const TrainPlan p = phase.NextTrain(Duration::Milliseconds(60));
  EXPECT_EQ(p.rate, Bandwidth::Mbps(50));
  EXPECT_EQ(p.payload, 1472u);
  // 50 Mbit/s x 40 ms / 1500 B = 166 packets.
  EXPECT_EQ(p.packets, 166u);
  EXPECT_EQ(p.wire_bytes(), 166 * 1500);
  EXPECT_EQ(p.send_time, Bandwidth::Mbps(50).TransferTime(166 * 1500));
  EXPECT_EQ(p.wait, Duration::Milliseconds(120) + p.send_time + Duration::Milliseconds(50));
  // Jumbo datagrams at 50 Mbit/s would be 27 packets: the floor is 64.
  EXPECT_EQ(RatePhase(RateOptions(9000)).NextTrain(Duration::Milliseconds(1)).packets, 64u);
}

TEST(RatePhaseTest, StopsBeforeATrainPastItsTimeShareOrTheByteBudget) {
  RatePhase phase(RateOptions());
  const TrainPlan p = phase.NextTrain(Duration::Milliseconds(10));
  const int64_t needs = (p.send_time + p.wait).ns();
  EXPECT_EQ(phase.StopBefore(p, kStart, kStart + needs, false), std::nullopt);
  EXPECT_THAT(phase.StopBefore(p, kStart, kStart + needs - 1, false).value_or(""),
              HasSubstr("time share"));
  EXPECT_THAT(phase.StopBefore(p, kStart, kStart + needs, true).value_or(""),
              HasSubstr("byte budget"));
}

TEST(RatePhaseTest, FindsTheBottleneckOfASyntheticPath) {
  const Bandwidth bottleneck = Bandwidth::Gbps(1);
  RatePhase phase(RateOptions());
  int trains = 0;
  while (!phase.done() && trains < 100) {
    const TrainPlan p = phase.NextTrain(Duration::Milliseconds(20));
    const Bandwidth sent_at = p.rate;  // the sender keeps its rate
    phase.OnReport(p, sent_at, p.packets, p.send_time, Through(p, sent_at, bottleneck));
    ++trains;
  }
  ASSERT_TRUE(phase.done());
  absl::StatusOr<RateOutcome> o = phase.Finish(Duration::Seconds(10), ByteCount{1} << 30);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->saturated);
  EXPECT_EQ(o->stop_reason, "full pipe");
  EXPECT_NEAR(o->rate.bps(), 1e9, 1e6);
  EXPECT_NEAR(o->max_delivery_bps, 1e9, 1e6);
  EXPECT_NEAR(o->rel_error, 0, 1e-9);
  EXPECT_EQ(o->short_trains, 0);
  EXPECT_FALSE(o->host_limited);
  EXPECT_TRUE(o->notes.empty());
  EXPECT_EQ(static_cast<int>(phase.trains().size()), trains);
  // 50, 100, 200, 400, 800 Mbit/s, 1.6 Gbit/s, then 1.25 x the best: rates only grew
  // up to the bottleneck.
  EXPECT_EQ(phase.trains()[1].target_rate, Bandwidth::Mbps(100));
}

TEST(RatePhaseTest, DeliveryRateFromTheSpanWhenTooFewPacketsForTheFit) {
  RatePhase phase(RateOptions(1500));
  const TrainPlan p = phase.NextTrain(Duration::Milliseconds(20));
  TrainReport r;
  r.packets = 4;
  r.wire_bytes = 4 * 1500;
  r.first_wire_bytes = 1500;
  r.span_ns = 36'000;              // 3 x 1500 B in 36 us: 1 Gbit/s
  r.fit_rate_bps = 5'000'000'000;  // ignored under 8 packets
  const TrainResult t =
      phase.OnReport(p, Bandwidth::Mbps(50), p.packets, Duration::Milliseconds(40), r);
  EXPECT_NEAR(t.delivery_rate.bps(), 1e9, 1e3);
  EXPECT_EQ(t.packets_received, 4u);
  EXPECT_EQ(t.packets_sent, p.packets);
  EXPECT_EQ(t.duration, Duration::Milliseconds(40));
  r.packets = 1;  // no span: no delivery rate
  EXPECT_EQ(phase.OnReport(p, Bandwidth::Mbps(50), p.packets, Duration::Milliseconds(40), r)
                .delivery_rate,
            Bandwidth::Zero());
}

TEST(RatePhaseTest, MissingReportsRepeatTwiceThenFail) {
  RatePhase phase(RateOptions());
  RatePhase::Verdict v = phase.OnNoReport(4);
  EXPECT_EQ(v.action, RatePhase::Action::kRepeat);
  EXPECT_EQ(v.text, "no report for train 4: repeated");
  EXPECT_EQ(phase.OnNoReport(5).action, RatePhase::Action::kRepeat);
  v = phase.OnNoReport(6);
  EXPECT_EQ(v.action, RatePhase::Action::kFail);
  EXPECT_THAT(v.text, HasSubstr("198.18.0.2:5201 stopped answering report requests"));
}

TEST(RatePhaseTest, EmptyTrainSearchesThePathMtuAndUsesIt) {
  RatePhase phase(RateOptions(9000));
  RatePhase::Verdict v = phase.OnEmptyTrain(1, 8972, /*may_search_pmtu=*/true);
  EXPECT_EQ(v.action, RatePhase::Action::kSearchPmtu);
  EXPECT_THAT(v.text, HasSubstr("no 8972-byte datagram of train 1 arrived"));
  v = phase.OnPathMtu(1, 8972, 1400);
  EXPECT_EQ(v.action, RatePhase::Action::kRepeat);
  EXPECT_THAT(phase.payload_sizes(), ElementsAre(1372));
  EXPECT_EQ(phase.NextTrain(Duration::Milliseconds(1)).payload, 1372u);
}

TEST(RatePhaseTest, EmptyTrainsWithoutAPathMtuStepDownTheSizesThenFail) {
  RatePhase phase(RateOptions(9000));
  // The search found nothing: the next size.
  RatePhase::Verdict v = phase.OnPathMtu(1, 8972, 0);
  EXPECT_EQ(v.action, RatePhase::Action::kNextSize);
  EXPECT_EQ(v.text, "no 8972-byte datagram of train 1 arrived; trying 1472 bytes");
  EXPECT_EQ(phase.NextTrain(Duration::Milliseconds(1)).payload, 1472u);
  EXPECT_EQ(phase.OnEmptyTrain(2, 1472, false).action, RatePhase::Action::kNextSize);
  EXPECT_EQ(phase.NextTrain(Duration::Milliseconds(1)).payload, 1172u);
  // The smallest size: one more try, then the phase fails.
  EXPECT_EQ(phase.OnEmptyTrain(3, 1172, false).action, RatePhase::Action::kRepeat);
  v = phase.OnEmptyTrain(4, 1172, false);
  EXPECT_EQ(v.action, RatePhase::Action::kFail);
  EXPECT_THAT(v.text, HasSubstr("do not get through (echoes do)"));
}

TEST(RatePhaseTest, NoTrainIsDeadlineExceededNamingTheBudgets) {
  RatePhase phase(RateOptions());
  absl::StatusOr<RateOutcome> o = phase.Finish(Duration::Seconds(10), ByteCount{1} << 30);
  ASSERT_FALSE(o.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(o.status()));
  EXPECT_THAT(o.status().message(), HasSubstr("no rate train completed"));
}

TEST(RatePhaseTest, ABusySenderIsHostLimitedAndUnsaturatedIsALowerBound) {
  RatePhase phase(RateOptions());
  int trains = 0;
  while (!phase.done() && trains < 100) {
    const TrainPlan p = phase.NextTrain(Duration::Milliseconds(20));
    const Bandwidth sent_at =
        Bandwidth::BitsPerSecond(p.rate.bps() * 0.5);  // the host reaches half of every target
    phase.OnReport(p, sent_at, p.packets, p.send_time * 2,
                   Through(p, sent_at, Bandwidth::Gbps(100)));
    ++trains;
  }
  ASSERT_TRUE(phase.done());
  absl::StatusOr<RateOutcome> o = phase.Finish(Duration::Seconds(10), ByteCount{1} << 30);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->stop_reason, "sender limited");
  EXPECT_FALSE(o->saturated);
  EXPECT_EQ(o->short_trains, trains);
  EXPECT_TRUE(o->host_limited);
  ASSERT_EQ(o->notes.size(), 2u);
  EXPECT_THAT(o->notes[0], HasSubstr("the rate is a lower bound"));
  EXPECT_THAT(o->notes[1], HasSubstr("the sender fell short of"));
}

// ---- loss phase ----

LossPlanInput LossInput() {
  LossPlanInput in;
  in.now_ns = kStart;
  in.deadline_ns = kStart + 5000 * kMs;
  in.rtt_p99 = Duration::Milliseconds(60);
  in.rtt_idle.min = Duration::Milliseconds(50);
  in.rtt_idle.p99 = Duration::Milliseconds(60);
  in.max_bytes = ByteCount{1} << 30;
  in.bytes_sent = ByteCount{100} << 20;
  in.loss_load = 0.8;
  in.rate = Bandwidth::Gbps(1);
  in.pmtu = 1500;
  in.packets_per_s = 20000;
  in.max_trace_packets = 0;
  return in;
}

TEST(LossPhaseTest, FillsTheTimeBeforeTheReserveAtTheLoadWithSizedPackets) {
  LossPlanInput in = LossInput();
  in.rate = Bandwidth::Mbps(500);
  LossPlan p = PlanLossPhase(in);
  ASSERT_TRUE(p.skip.empty()) << p.skip;
  // Reserve: 5 x 60 ms + 10 ms spread + 600 ms = 910 ms; 4.09 s left.
  EXPECT_EQ(p.reserve, Duration::Milliseconds(910));
  EXPECT_EQ(p.stop_ns, kStart + 4090 * kMs);
  EXPECT_DOUBLE_EQ(p.rate_bps, 0.4e9);
  // 400 Mbit/s / 20000 packets/s = 2500 wire bytes, capped at the path MTU.
  EXPECT_EQ(p.payload, 1472u);
  EXPECT_EQ(p.packets, static_cast<uint64_t>(0.4e9 * 4.09 / (8 * 1500)));
  EXPECT_EQ(p.echo_every, p.packets / 2000);
  EXPECT_NEAR(p.seconds(), 4.09, 0.001);
  // Twice the rate would be more than a train may hold.
  in.rate = Bandwidth::Gbps(1);
  p = PlanLossPhase(in);
  EXPECT_EQ(p.packets, kMaxTrainPackets);
  EXPECT_NEAR(p.seconds(), kMaxTrainPackets * 1500 * 8 / 0.8e9, 1e-9);
}

TEST(LossPhaseTest, SlowLinksGetSmallPacketsAndTheTraceLimitCapsTheCount) {
  LossPlanInput in = LossInput();
  in.rate = Bandwidth::Mbps(10);
  LossPlan p = PlanLossPhase(in);
  ASSERT_TRUE(p.skip.empty()) << p.skip;
  EXPECT_EQ(p.payload, 64u);  // 8 Mbit/s / 20000 = 50 bytes: the 64-byte floor
  in.rate = Bandwidth::Gbps(1);
  in.max_trace_packets = 5000;
  p = PlanLossPhase(in);
  EXPECT_EQ(p.packets, 5000u);
  EXPECT_EQ(p.echo_every, 2u);
}

TEST(LossPhaseTest, TheByteBudgetLowersTheRate) {
  LossPlanInput in = LossInput();
  in.bytes_sent = in.max_bytes - (ByteCount{100} << 20);  // 100 MiB left over 4.09 s
  const LossPlan p = PlanLossPhase(in);
  ASSERT_TRUE(p.skip.empty()) << p.skip;
  EXPECT_NEAR(p.rate_bps, (100 << 20) * 8 / 4.09, 1.0);
}

TEST(LossPhaseTest, SkippedWithoutTimeOrPackets) {
  LossPlanInput in = LossInput();
  in.deadline_ns = in.now_ns + 1000 * kMs;  // 90 ms after the reserve
  EXPECT_THAT(PlanLossPhase(in).skip, HasSubstr("no time left"));
  in = LossInput();
  in.rate = Bandwidth::Mbps(0.1);  // 80 kbit/s of 92-byte packets: a few hundred
  EXPECT_THAT(PlanLossPhase(in).skip, HasSubstr("under 1000 packets"));
}

TEST(LossPhaseTest, TheReportGivesLossReorderAndTheResponderDrops) {
  TrainReport r{.packets = 9900,
                .duplicates = 2,
                .reordered = 5,
                .max_extent_packets = 3,
                .max_late_ns = 2'000'000,
                .trace_packets = 10000,
                .lost = 100,
                .bursts = 100,
                .n0x = 9899,
                .n01 = 100,
                .n1x = 100,
                .n11 = 0};
  LossReading reading = ReadLossReport(r);
  EXPECT_NEAR(reading.loss.loss_rate, 0.01, 1e-9);
  EXPECT_EQ(reading.reorder.packets, 9900u);
  EXPECT_EQ(reading.reorder.reordered, 5u);
  EXPECT_EQ(reading.reorder.max_extent_packets, 3u);
  EXPECT_EQ(reading.reorder.max_late, Duration::Milliseconds(2));
  EXPECT_EQ(reading.duplicates, 2u);
  EXPECT_TRUE(reading.notes.empty());
  r.rx_drops = 17;
  reading = ReadLossReport(r);
  EXPECT_EQ(reading.responder_drops, 17u);
  ASSERT_EQ(reading.notes.size(), 1u);
  EXPECT_THAT(reading.notes[0], HasSubstr("dropped 17 datagrams"));
}

}  // namespace
}  // namespace longhaul::tuner::probe
