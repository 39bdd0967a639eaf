// AckTracker: ranges, gaps, loss statistics and the missing count.
#include "transport/core/recv/ack_tracker.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(AckTrackerTest, RangesGapsAndStatistics) {
  AckTracker t(4, Duration::Milliseconds(1), 16);
  Time now = Time::FromNanoseconds(1000);
  for (PacketNumber pn : {0, 1, 2, 5, 6, 9})
    EXPECT_TRUE(t.OnPacket(now, pn, true, false, true));
  EXPECT_TRUE(t.AckDue(now));         // gaps ask for an immediate ACK
  EXPECT_EQ(t.packets_missing(), 4u); // 3, 4 and 7, 8
  EXPECT_EQ(t.loss_bursts(), 2u);
  EXPECT_TRUE(t.IsDuplicate(5));
  EXPECT_FALSE(t.IsDuplicate(4));
  EXPECT_FALSE(t.OnPacket(now, 5, true, false, false)); // duplicate
  EXPECT_TRUE(t.OnPacket(now, 4, true, false, false));  // late
  wire::AckFrame ack;
  std::vector<wire::AckRange> ranges;
  t.BuildAck(now, &ack, &ranges);
  EXPECT_EQ(ack.largest, 9u);
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const wire::AckRange& r : ranges) spans.emplace_back(r.low, r.high);
  EXPECT_EQ(spans, (std::vector<std::pair<uint64_t, uint64_t>>{{9, 9}, {4, 6}, {0, 2}}));
  t.OnAckSent();
  EXPECT_FALSE(t.ack_pending());
  EXPECT_TRUE(t.OnPacket(now, 10, true, false, false));
  EXPECT_FALSE(t.AckDue(now));
  EXPECT_TRUE(t.AckDue(now + Duration::Milliseconds(1)));
}

TEST(AckTrackerTest, MissingCountFollowsFilledGaps) {
  AckTracker t(100, Duration::Milliseconds(1), 16);
  Time now;
  t.OnPacket(now, 0, true, false, false);
  t.OnPacket(now, 10, true, false, false); // gap 1..9
  EXPECT_EQ(t.packets_missing(), 9u);
  EXPECT_EQ(t.loss_bursts(), 1u);
  t.OnPacket(now, 5, true, false, false); // splits the gap
  EXPECT_EQ(t.packets_missing(), 8u);
  EXPECT_EQ(t.loss_bursts(), 2u);
  for (PacketNumber pn : {1, 2, 3, 4})
    t.OnPacket(now, pn, true, false, false);
  EXPECT_EQ(t.loss_bursts(), 1u);
  for (PacketNumber pn : {6, 7, 8, 9})
    t.OnPacket(now, pn, true, false, false);
  EXPECT_EQ(t.packets_missing(), 0u);
  EXPECT_EQ(t.loss_bursts(), 0u);
}

} // namespace
} // namespace longhaul
