// BbrController's probe outcomes: a flow alone at the bottleneck backs its probe off to
// BBR's gain once a probe found nothing and queued its own excess, restores the fair gain
// when a probe finds more, and takes losses in its own probe's queue as the end of the
// probe rather than as congestion.
#include <cstdint>

#include "gtest/gtest.h"
#include "transport/core/cc/bbr.h"
#include "transport/core/config.h"
#include "tests/unit/cc/bbr_driver.h"

namespace longhaul {
namespace {

using bbr_testing::BbrConfig;
using bbr_testing::Driver;
using bbr_testing::FillPipe;
using bbr_testing::kRtt;

// 1 Gbit/s x 58 ms is ~880 packets per RTT: the fair probe asks 1000 more, clamped to 1.75.
constexpr double kFairGain = 1.75;

// One round on a link this flow fills alone: while it probes, its excess queues (the RTT
// grows by the probe's excess, the delivery stays at the link's rate).
void AloneRound(Driver* d, const BbrController& bbr, Bandwidth link) {
  const bool probing = bbr.phase() == BbrController::Phase::kUp;
  d->Round(link, probing ? kRtt.Scaled(1.5) : kRtt);
}

TEST(BbrProbeTest, AFlowAloneBacksItsProbeOffToBbrsGain) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  ASSERT_EQ(bbr.mode(), BbrController::Mode::kProbeBw);
  EXPECT_NEAR(bbr.ProbeGain(), kFairGain, 1e-9);
  for (int i = 0; i < 80; ++i) AloneRound(&d, bbr, link);
  EXPECT_GE(bbr.probe_backoffs(), 3u);
  EXPECT_NEAR(bbr.ProbeGain(), 1.25, 0.02);  // BBR's probe, or within a hair of it
  EXPECT_EQ(bbr.congestion_events(), 0u);
  EXPECT_NEAR(bbr.bandwidth().bps(), link.bps(), link.bps() * 1e-6);
}

TEST(BbrProbeTest, AProbeThatFindsMoreRestoresTheFairGain) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  for (int i = 0; i < 80; ++i) AloneRound(&d, bbr, link);
  ASSERT_LT(bbr.probe_scale(), 1.0);
  // Another flow leaves (or the link grows): what the probe sends is delivered.
  const uint64_t backoffs = bbr.probe_backoffs();
  bool probed = false;
  for (int i = 0; i < 40 && !(probed && bbr.phase() != BbrController::Phase::kUp); ++i) {
    if (bbr.phase() == BbrController::Phase::kUp) {
      probed = true;
      d.Round(bbr.bandwidth().Scaled(bbr.pacing_gain()), kRtt);
    } else {
      d.Round(bbr.bandwidth(), kRtt);
    }
  }
  ASSERT_TRUE(probed);
  for (int i = 0; i < 3; ++i) d.Round(bbr.bandwidth(), kRtt);  // the probe is judged
  EXPECT_EQ(bbr.probe_scale(), 1.0);
  EXPECT_EQ(bbr.probe_backoffs(), backoffs);
  EXPECT_GT(bbr.bandwidth().bps(), link.bps() * 1.1);
}

TEST(BbrProbeTest, ABackoffNeedsItsOwnQueue) {
  // Probes that find nothing while the RTT stays flat (a much larger link shared with
  // others: the excess hardly moves the queue) keep the fair gain.
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  for (int i = 0; i < 80; ++i) d.Round(link, kRtt);
  EXPECT_EQ(bbr.probe_backoffs(), 0u);
  EXPECT_NEAR(bbr.ProbeGain(), kFairGain, 1e-9);
}

TEST(BbrProbeTest, LossInTheProbesOwnQueueEndsTheProbeWithoutACut) {
  BbrController bbr(BbrConfig());
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  for (int i = 0; i < 20 && bbr.phase() != BbrController::Phase::kUp; ++i) d.Round(link, kRtt);
  ASSERT_EQ(bbr.phase(), BbrController::Phase::kUp);
  d.Ack(kRtt / 16, link.BytesIn(kRtt) / 16, link, kRtt.Scaled(1.6));
  d.Loss(10, 8192, kRtt.Scaled(1.6));  // the queue the probe built overflows
  EXPECT_EQ(bbr.congestion_events(), 0u);
  EXPECT_EQ(bbr.phase(), BbrController::Phase::kDown);
  EXPECT_NEAR(bbr.bandwidth().bps(), link.bps(), link.bps() * 1e-6);
  // The same loss outside a probe, once the drain after it is over, is congestion.
  for (int i = 0; i < 20 && bbr.phase() != BbrController::Phase::kCruise; ++i) d.Round(link, kRtt);
  ASSERT_EQ(bbr.phase(), BbrController::Phase::kCruise);
  d.Round(link, kRtt);
  d.Loss(10, 8192, kRtt.Scaled(1.6));
  EXPECT_EQ(bbr.congestion_events(), 1u);
}

TEST(BbrProbeTest, OffKeepsTheFairGain) {
  BbrParams p;
  p.probe_bw.found_share = 0;
  BbrController bbr(BbrConfig(), 1, p);
  Driver d(&bbr);
  const Bandwidth link = Bandwidth::Gbps(1);
  FillPipe(&d, &bbr, link);
  for (int i = 0; i < 80; ++i) AloneRound(&d, bbr, link);
  EXPECT_EQ(bbr.probe_backoffs(), 0u);
  EXPECT_NEAR(bbr.ProbeGain(), kFairGain, 1e-9);
}

}  // namespace
}  // namespace longhaul
