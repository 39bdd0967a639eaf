#include "transport/sim/link_model.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/link_spec.h"

namespace longhaul::sim {
namespace {

using ::longhaul::testing::ParseTestLinkSpec;

Time Us(int64_t us) { return Time::FromNanoseconds(us * 1000); }

// 972-byte datagrams are 1000 bytes on the wire (28 bytes overhead): 8 us at 1 Gbit/s.
constexpr size_t kDatagram = 972;

TEST(LinkModelTest, SerialisationAndPropagation) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,rtt=10ms"), 1);
  Verdict a = link.Offer(Us(0), kDatagram, false);
  Verdict b = link.Offer(Us(0), kDatagram, false);
  EXPECT_EQ(link.BacklogBytes(Us(0)), 2000u);
  EXPECT_EQ(link.BacklogBytes(Us(12)), 500u);
  Verdict c = link.Offer(Us(100), kDatagram, false);  // link idle again by then
  ASSERT_FALSE(a.dropped());
  EXPECT_EQ(a.deliver_at, Us(8 + 5000));
  EXPECT_EQ(b.deliver_at, Us(16 + 5000));
  EXPECT_EQ(c.deliver_at, Us(108 + 5000));
  EXPECT_EQ(link.counters().delivered, 3u);
}

TEST(LinkModelTest, NoRateDriftOverManyPackets) {
  // 1528-byte wire packets at 100 Gbit/s take 122.24 ns each; after a million the
  // departure time must be exact to within a nanosecond.
  LinkDirection link(ParseTestLinkSpec("rate=100gbit,rtt=0,queue=10GB"), 1);
  Verdict v;
  for (int i = 0; i < 1000000; ++i) v = link.Offer(Time::Zero(), 1500, false);
  EXPECT_NEAR(static_cast<double>(v.deliver_at.ns()), 122240000.0, 1.0);
}

TEST(LinkModelTest, DropTailQueue) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,rtt=10ms,queue=10000"), 1);
  int accepted = 0, dropped = 0;
  for (int i = 0; i < 20; ++i) {
    Verdict v = link.Offer(Us(0), kDatagram, false);
    if (v.drop == DropReason::kQueueFull) ++dropped;
    else if (!v.dropped()) ++accepted;
  }
  EXPECT_EQ(accepted, 10);
  EXPECT_EQ(dropped, 10);
  EXPECT_EQ(link.counters().dropped_queue, 10u);
  EXPECT_EQ(link.counters().max_queue_bytes, 10000u);
  // Once drained by half, five more fit.
  int later = 0;
  for (int i = 0; i < 10; ++i) later += !link.Offer(Us(40), kDatagram, false).dropped();
  EXPECT_EQ(later, 5);
}

TEST(LinkModelTest, TimeWeightedQueue) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,rtt=1ms"), 1);
  for (int i = 0; i < 10; ++i) link.Offer(Us(0), kDatagram, false);
  // The 10000-byte backlog drains linearly over 80 us, then the link idles: over 160 us the
  // time-weighted mean is 10000 / 2 * 80 / 160 = 2500 bytes.
  LinkCounters c = link.Finish(Us(160));
  EXPECT_NEAR(c.avg_queue_bytes, 2500, 25);
  EXPECT_EQ(c.max_queue_bytes, 10000u);
}

TEST(LinkModelTest, TooBig) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,mtu=1500"), 1);
  EXPECT_FALSE(link.Offer(Us(0), 1472, false).dropped());
  EXPECT_EQ(link.Offer(Us(0), 1473, false).drop, DropReason::kTooBig);
  EXPECT_EQ(link.counters().dropped_too_big, 1u);
}

TEST(LinkModelTest, BernoulliLossRate) {
  LinkDirection link(ParseTestLinkSpec("rate=100gbit,loss=0.01"), 7);
  const int n = 1000000;
  for (int i = 0; i < n; ++i) link.Offer(Us(i), 1000, false);
  // Binomial(1e6, 0.01): mean 10000, sd 99.5; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(link.counters().dropped_loss), 10000, 500);
  // Independent losses: mean burst 1/(1-p) ~ 1.01.
  double mean_burst = static_cast<double>(link.counters().dropped_loss) / link.counters().loss_bursts;
  EXPECT_NEAR(mean_burst, 1.0101, 0.01);
}

TEST(LinkModelTest, GilbertBurstsAndAverage) {
  LinkDirection link(ParseTestLinkSpec("rate=100gbit,loss=0.01,burst=4"), 11);
  EXPECT_DOUBLE_EQ(link.ge_p_bad_to_good(), 0.25);
  const int n = 2000000;
  for (int i = 0; i < n; ++i) link.Offer(Us(i), 1000, false);
  double loss = static_cast<double>(link.counters().dropped_loss) / n;
  double mean_burst = static_cast<double>(link.counters().dropped_loss) / link.counters().loss_bursts;
  EXPECT_NEAR(loss, 0.01, 0.001);
  EXPECT_NEAR(mean_burst, 4.0, 0.3);
}

TEST(LinkModelTest, SameSeedSameVerdicts) {
  LinkSpec spec = ParseTestLinkSpec("rate=1gbit,rtt=10ms,loss=0.1,jitter=1ms,reorder=0.1,dup=0.1,corrupt=0.1");
  LinkDirection a(spec, 5), b(spec, 5), c(spec, 6);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    Verdict va = a.Offer(Us(i * 10), kDatagram, false);
    Verdict vb = b.Offer(Us(i * 10), kDatagram, false);
    Verdict vc = c.Offer(Us(i * 10), kDatagram, false);
    ASSERT_EQ(va.drop, vb.drop);
    ASSERT_EQ(va.deliver_at, vb.deliver_at);
    ASSERT_EQ(va.corrupt_bit, vb.corrupt_bit);
    differ += va.drop != vc.drop || va.deliver_at != vc.deliver_at;
  }
  EXPECT_GT(differ, 100);
}

TEST(LinkModelTest, EcnMarksAboveThresholdOnlyEct) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,rtt=1ms,ecn=5000"), 1);
  int marked_ect = 0, marked_not = 0;
  for (int i = 0; i < 10; ++i) {
    // Backlog before packet i is i*1000 bytes; ECT packets above 5000 get CE.
    Verdict v = link.Offer(Us(0), kDatagram, i % 2 == 0);
    if (v.ce_mark) (i % 2 == 0 ? marked_ect : marked_not)++;
    if (i % 2 == 0) {
      EXPECT_EQ(v.ce_mark, i * 1000 > 5000) << i;
    }
  }
  EXPECT_EQ(marked_ect, 2);  // i = 6, 8
  EXPECT_EQ(marked_not, 0);
  EXPECT_EQ(link.counters().ce_marked, 2u);
}

TEST(LinkModelTest, JitterPreservesOrder) {
  LinkDirection link(ParseTestLinkSpec("rate=10gbit,rtt=10ms,jitter=2ms"), 3);
  Time last = Time::Zero();
  int64_t min_delay = INT64_MAX, max_delay = 0;
  for (int i = 0; i < 100000; ++i) {
    Time now = Us(i);
    Verdict v = link.Offer(now, kDatagram, false);
    ASSERT_FALSE(v.reordered);
    ASSERT_GE(v.deliver_at, last) << i;
    last = v.deliver_at;
    min_delay = std::min(min_delay, (v.deliver_at - now).ns());
    max_delay = std::max(max_delay, (v.deliver_at - now).ns());
  }
  // Even with a packet every microsecond, delays spread over the whole jitter range
  // above the 5 ms one-way delay (plus under a microsecond of serialisation).
  EXPECT_GE(min_delay, 5000000);
  EXPECT_LT(min_delay, 5050000);
  EXPECT_GT(max_delay, 6950000);
  EXPECT_LE(max_delay, 7000000 + 1000);
}

TEST(LinkModelTest, ReorderDupCorruptCounts) {
  LinkDirection link(ParseTestLinkSpec("rate=100gbit,rtt=10ms,reorder=0.1,reorder_delay=3ms,dup=0.05,corrupt=0.02"), 9);
  const int n = 100000;
  int reordered = 0, dups = 0, corrupt = 0;
  for (int i = 0; i < n; ++i) {
    Verdict v = link.Offer(Us(i), 1000, false);
    ASSERT_FALSE(v.dropped());
    if (v.reordered) {
      ++reordered;
      EXPECT_GE((v.deliver_at - Us(i)).ns(), 8000000);
    }
    if (v.duplicate) {
      ++dups;
      EXPECT_GT(v.duplicate_at, v.deliver_at);
    }
    if (v.corrupt_bit >= 0) {
      ++corrupt;
      EXPECT_LT(v.corrupt_bit, 8000);
    }
  }
  EXPECT_NEAR(reordered, 10000, 500);  // sd ~95
  EXPECT_NEAR(dups, 5000, 350);        // sd ~69
  EXPECT_NEAR(corrupt, 2000, 225);     // sd ~44
  EXPECT_EQ(link.counters().reordered, static_cast<uint64_t>(reordered));
  EXPECT_EQ(link.counters().duplicated, static_cast<uint64_t>(dups));
  EXPECT_EQ(link.counters().corrupted, static_cast<uint64_t>(corrupt));
}

TEST(LinkModelTest, ReconfigureChangesRate) {
  LinkSpec spec = ParseTestLinkSpec("rate=1gbit,rtt=0");
  LinkDirection link(spec, 1);
  EXPECT_EQ(link.Offer(Us(0), kDatagram, false).deliver_at, Us(8));
  LinkSpec faster = spec;
  faster.rate = Bandwidth::Gbps(2);
  link.Reconfigure(faster, Us(100));
  EXPECT_EQ(link.Offer(Us(100), kDatagram, false).deliver_at, Us(104));
  LinkSpec longer = faster;
  longer.rtt = Duration::Milliseconds(2);
  link.Reconfigure(longer, Us(200));
  EXPECT_EQ(link.Offer(Us(200), kDatagram, false).deliver_at, Us(1204));
}

TEST(LinkModelTest, FullLossDropsEverything) {
  LinkDirection link(ParseTestLinkSpec("rate=1gbit,loss=1"), 1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(link.Offer(Us(i), 100, false).drop, DropReason::kLoss);
}

}  // namespace
}  // namespace longhaul::sim
