#include "transport/fec/fec_policy.h"

#include <iterator>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "transport/fec/loss_model.h"

namespace longhaul::fec {
namespace {

FecPolicyInput Input(double p, double burst, uint64_t packets = 1024) {
  FecPolicyInput in;
  in.loss_rate = p;
  in.mean_burst = burst;
  in.packets_per_message = packets;
  return in;
}

TEST(FecPolicyTest, CleanLinkIsOff) {
  FecPolicyDecision d = ChooseFecParameters(Input(0.0, 1));
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kCleanLink);
  d = ChooseFecParameters(Input(1e-7, 1));
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kCleanLink);
}

TEST(FecPolicyTest, ReasonsHaveDistinctNames) {
  const FecPolicyReason all[] = {FecPolicyReason::kCleanLink, FecPolicyReason::kNotNeeded,
                                 FecPolicyReason::kMeetsTarget, FecPolicyReason::kBestEffort,
                                 FecPolicyReason::kOverLimits};
  std::set<std::string> names;
  for (FecPolicyReason r : all) names.insert(FecPolicyReasonName(r));
  EXPECT_EQ(names.size(), std::size(all));
  EXPECT_EQ(names.count("?"), 0u);
  EXPECT_STREQ(FecPolicyReasonName(FecPolicyReason::kMeetsTarget), "meets-target");
}

TEST(FecPolicyTest, OffWhenMessagesAlreadyMeetTheTarget) {
  // 16 packets per message at p = 1e-5: P(any loss) = 1.6e-4 < 1e-3.
  const FecPolicyDecision d = ChooseFecParameters(Input(1e-5, 1, 16));
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kNotNeeded);
  EXPECT_LT(d.repairs_without_fec, 1e-3);
}

TEST(FecPolicyTest, ModerateLossAtK32NeedsAtLeastTwoParity) {
  FecPolicyInput in = Input(1e-3, 1);
  in.min_k = in.max_k = 32;
  const FecPolicyDecision d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kMeetsTarget);
  EXPECT_EQ(d.k, 32u);
  EXPECT_GE(d.m, 2u);
  EXPECT_LE(d.repairs_per_message, 1e-3);
  EXPECT_EQ(d.blocks_per_message, 1024u / 32);
  // m - 1 parity would not have met the target.
  const GilbertModel link = GilbertModel::FromLossAndBurst(1e-3, 1);
  EXPECT_GT(ProbMoreThan(link, 32 + d.m - 1, d.m - 1) * d.blocks_per_message, 1e-3);
  // Far below one repair round per message, versus ~64% of messages without FEC.
  EXPECT_GT(d.repairs_without_fec, 0.5);
}

TEST(FecPolicyTest, MoreLossMeansMoreParity) {
  FecPolicyInput lo = Input(1e-3, 1), hi = Input(1e-2, 1);
  lo.min_k = lo.max_k = hi.min_k = hi.max_k = 32;
  const FecPolicyDecision a = ChooseFecParameters(lo);
  const FecPolicyDecision b = ChooseFecParameters(hi);
  ASSERT_TRUE(a.enabled && b.enabled);
  EXPECT_GT(b.m, a.m);
  EXPECT_GT(b.overhead, a.overhead);
  EXPECT_LE(b.repairs_per_message, 1e-3);
  // With k free as well, overhead still grows with loss.
  const FecPolicyDecision fa = ChooseFecParameters(Input(1e-3, 1));
  const FecPolicyDecision fb = ChooseFecParameters(Input(1e-2, 1));
  EXPECT_GT(fb.overhead, fa.overhead);
}

TEST(FecPolicyTest, OverheadIsMonotoneInLossRate) {
  double prev = 0;
  for (double p : {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2}) {
    const FecPolicyDecision d = ChooseFecParameters(Input(p, 1, 8192));
    ASSERT_TRUE(d.enabled) << p;
    ASSERT_EQ(d.reason, FecPolicyReason::kMeetsTarget) << p;
    EXPECT_GE(d.overhead, prev) << p;
    EXPECT_LE(d.repairs_per_message, 1e-3) << p;
    prev = d.overhead;
  }
}

TEST(FecPolicyTest, BurstyLossChoosesDeeperInterleave) {
  const FecPolicyDecision flat = ChooseFecParameters(Input(1e-3, 1));
  const FecPolicyDecision bursty = ChooseFecParameters(Input(1e-3, 8));
  ASSERT_TRUE(flat.enabled && bursty.enabled);
  EXPECT_EQ(flat.interleave, 1u);
  EXPECT_GE(bursty.interleave, 4u);
  EXPECT_EQ(bursty.reason, FecPolicyReason::kMeetsTarget);
  // Without interleaving the same target costs far more parity (or is out of reach).
  FecPolicyInput no_il = Input(1e-3, 8);
  no_il.max_interleave = 1;
  const FecPolicyDecision d1 = ChooseFecParameters(no_il);
  EXPECT_TRUE(d1.reason == FecPolicyReason::kBestEffort || d1.overhead > 2 * bursty.overhead)
      << "D=1 overhead " << d1.overhead << " vs " << bursty.overhead;
  // Longer bursts need at least as deep an interleave.
  const FecPolicyDecision longer = ChooseFecParameters(Input(1e-3, 32));
  EXPECT_GE(longer.interleave, bursty.interleave);
}

TEST(FecPolicyTest, SmallMessagesAvoidDeepInterleaveAndUseShortBlocks) {
  // 12 packets per message: blocks cannot be longer than the message; deep interleave
  // would only add shortened blocks.
  const FecPolicyDecision d = ChooseFecParameters(Input(1e-2, 1, 12));
  ASSERT_TRUE(d.enabled);
  EXPECT_EQ(d.interleave, 1u);
  EXPECT_EQ(d.blocks_per_message, 1u);
  EXPECT_LE(d.repairs_per_message, 1e-3);
}

TEST(FecPolicyTest, WindowBoundsTheGroup) {
  FecPolicyInput in = Input(1e-3, 8);
  in.window_packets = 64;
  const FecPolicyDecision d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_LE(static_cast<uint64_t>(d.interleave) * (d.k + d.m), 64u);
}

TEST(FecPolicyTest, UnreachableTargetIsBestEffort) {
  FecPolicyInput in = Input(0.3, 20);
  in.max_m = 4;
  in.max_interleave = 2;
  const FecPolicyDecision d = ChooseFecParameters(in);
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kBestEffort);
  EXPECT_GT(d.repairs_per_message, 1e-3);
  EXPECT_EQ(d.m, 4u);
}

TEST(FecPolicyTest, RespectsLimits) {
  FecPolicyInput in = Input(2e-2, 2, 100000);
  in.max_k = 16;
  in.max_m = 6;
  in.max_interleave = 8;
  const FecPolicyDecision d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_LE(d.k, 16u);
  EXPECT_LE(d.m, 6u);
  EXPECT_LE(d.interleave, 8u);
  EXPECT_GT(d.candidates_evaluated, 0u);
}

}  // namespace
}  // namespace longhaul::fec

namespace longhaul::fec {
namespace {

TEST(FecPolicyTest, OverheadCapTurnsFecOffWhenEvenOneParityIsTooCostly) {
  // One packet per message: any parity doubles the traffic.
  const FecPolicyDecision d = ChooseFecParameters(Input(1e-2, 1, 1));
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kOverLimits);
  // Long bursts in short messages: the choice stays within the cap.
  for (double burst : {8.0, 32.0}) {
    const FecPolicyDecision s = ChooseFecParameters(Input(1e-2, burst, 128));
    ASSERT_TRUE(s.enabled);
    EXPECT_LE(s.overhead, 0.5);
  }
}

}  // namespace
}  // namespace longhaul::fec

namespace longhaul::fec {
namespace {

TEST(FecPolicyRepairCostTest, CheapRepairsNeedNoFec) {
  // A 64 MiB message (7 545 packets) at 1e-4: most messages lose a packet, but where a
  // repair round costs 3 % of the message's own time (1 Gbit/s, 10 ms, 3 round trips)
  // retransmission alone keeps the tail within 15 % and the mean within 5 %.
  FecPolicyInput in = Input(1e-4, 1, 7545);
  in.target_repairs_per_message = 2.5e-4;
  in.repair_cost = 0.03;
  FecPolicyDecision d = ChooseFecParameters(in);
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kNotNeeded);
  // A repair that costs half the message's time (200 ms round trips) needs FEC.
  in.repair_cost = 0.5;
  d = ChooseFecParameters(in);
  EXPECT_TRUE(d.enabled);
  // So does a cheap repair that also holds back many messages submitted behind it.
  in.repair_cost = 0.03;
  in.messages_behind = 10;
  d = ChooseFecParameters(in);
  EXPECT_TRUE(d.enabled);
}

TEST(FecPolicyRepairCostTest, OnlyLossesNearAMessagesEndCost) {
  // 64 MiB (8 192 packets) at 1e-3 where a round trip carries 100 packets and costs 10 %
  // of the message's time: every message loses packets, but only a loss among its last
  // 100 (9.5 % of messages) is repaired after the rest of it has arrived.
  FecPolicyInput in = Input(1e-3, 1, 8192);
  in.target_repairs_per_message = 2.5e-4;
  in.repair_cost = 0.1;
  in.exposed_packets = 100;
  FecPolicyDecision d = ChooseFecParameters(in);
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kNotNeeded);
  // Counting every loss as a repair at the end (0.1 on the mean per message) calls for FEC.
  in.exposed_packets = 0;
  d = ChooseFecParameters(in);
  EXPECT_TRUE(d.enabled);
  // Where even the exposed packets are clean often enough, FEC is not needed whatever a
  // repair costs.
  in = Input(2e-6, 1, 100000);
  in.target_repairs_per_message = 2.5e-4;
  in.repair_cost = 2.0;
  EXPECT_TRUE(ChooseFecParameters(in).enabled);
  in.exposed_packets = 100;
  d = ChooseFecParameters(in);
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kNotNeeded);
}

TEST(FecPolicyRepairCostTest, LostResendsAreMoreRoundsForTheTail) {
  // As above at 1e-2: 63 % of messages need a repair round and 1 % of those resends are
  // lost again, more than the target: the tail sees two rounds, 0.2 of the message, past
  // its 0.15 slack: FEC.
  FecPolicyInput in = Input(1e-2, 1, 8192);
  in.target_repairs_per_message = 2.5e-4;
  in.repair_cost = 0.1;
  in.exposed_packets = 100;
  EXPECT_TRUE(ChooseFecParameters(in).enabled);
  // At 0.06 per round two rounds fit the tail, and the repairs add 0.038 to the mean,
  // within its 0.05.
  in.repair_cost = 0.06;
  FecPolicyDecision d = ChooseFecParameters(in);
  EXPECT_FALSE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kNotNeeded);
}

TEST(FecPolicyTest, ParityThatWouldPutEveryMessagePastTheTailIsCapped) {
  // 1e-3 in bursts of 4 on 128-packet messages: 18.8 % parity meets the target. Where
  // serialisation is 95 % of a message's time that parity alone puts every message past
  // 1 + 0.9 x 0.15: the policy stays within 0.9 x 0.15 / 0.95 = 14.2 %, best-effort, as
  // that code's repairs stay within 4 x the target (the tail's share of messages).
  FecPolicyInput in = Input(1e-3, 4, 128);
  in.target_repairs_per_message = 2.5e-4;
  in.max_overhead = 0.25;
  FecPolicyDecision d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_EQ(d.reason, FecPolicyReason::kMeetsTarget);
  EXPECT_GT(d.overhead, 0.142);
  in.serialisation_share = 0.95;
  d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_LE(d.overhead, 0.142);
  EXPECT_EQ(d.reason, FecPolicyReason::kBestEffort);
  EXPECT_LE(d.repairs_per_message, 4 * in.target_repairs_per_message);
  // Where serialisation is half the time the cap (27 %) is above max_overhead: no change.
  in.serialisation_share = 0.5;
  d = ChooseFecParameters(in);
  EXPECT_EQ(d.reason, FecPolicyReason::kMeetsTarget);
  EXPECT_GT(d.overhead, 0.142);
}

TEST(FecPolicyTest, WhereTheCapLeavesFrequentRepairsTheWholeBudgetIsUsed) {
  // 1e-2 in bursts of 8 on 128-packet messages: within the 14.2 % cap repairs would hit
  // far more than the tail's share of messages (each a repair round): the policy searches
  // up to max_overhead, as without the cap.
  FecPolicyInput in = Input(1e-2, 8, 128);
  in.target_repairs_per_message = 2.5e-4;
  in.max_overhead = 0.25;
  const FecPolicyDecision uncapped = ChooseFecParameters(in);
  in.serialisation_share = 0.95;
  const FecPolicyDecision d = ChooseFecParameters(in);
  ASSERT_TRUE(d.enabled);
  EXPECT_GT(d.overhead, 0.142);
  EXPECT_EQ(d.m, uncapped.m);
  EXPECT_EQ(d.k, uncapped.k);
  EXPECT_EQ(d.interleave, uncapped.interleave);
  // Unless that loss rate is only a bound from few loss events: then the cap holds.
  in.loss_is_bound = true;
  const FecPolicyDecision bound = ChooseFecParameters(in);
  ASSERT_TRUE(bound.enabled);
  EXPECT_LE(bound.overhead, 0.142);
  EXPECT_EQ(bound.reason, FecPolicyReason::kBestEffort);
}

}  // namespace
}  // namespace longhaul::fec
