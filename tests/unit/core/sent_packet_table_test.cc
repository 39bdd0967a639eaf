// SentPacketTable: the ring of sent packets, its outstanding and unacked walks.
#include "transport/core/send/sent_packet_table.h"

#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(SentPacketTableTest, FindOutstandingSkipsFinishedPackets) {
  SentPacketTable t;
  for (int i = 0; i < 5000; ++i)
    t.Add(); // grows past the initial ring
  EXPECT_EQ(t.FindOutstanding(0), 0u);
  for (PacketNumber pn = 0; pn < 5000; ++pn) {
    if (pn % 7 != 0)
      t.Finish(pn);
  }
  EXPECT_EQ(t.FindOutstanding(1), 7u);
  EXPECT_EQ(t.FindOutstanding(7), 7u);
  EXPECT_EQ(t.FindOutstanding(4999), 5000u);
  t.Finish(7);
  EXPECT_EQ(t.FindOutstanding(0), 0u);
  EXPECT_EQ(t.FindOutstanding(1), 14u);
  t.ReleaseFront([](const SentPacket &p) { return p.finished; });
  EXPECT_EQ(t.base(), 0u); // packet 0 is outstanding
  t.Finish(0);
  t.ReleaseFront([](const SentPacket &p) { return p.finished; });
  EXPECT_EQ(t.base(), 14u);
}

TEST(SentPacketTableTest, UnackedWalkSeesLostPackets) {
  SentPacketTable t;
  for (int i = 0; i < 10; ++i)
    t.Add();
  t.Finish(3); // lost
  t.Get(3).lost = true;
  t.Finish(4);
  t.MarkAcked(4);
  EXPECT_EQ(t.FindOutstanding(3), 5u);
  EXPECT_EQ(t.FindUnacked(3), 3u);
  EXPECT_EQ(t.FindUnacked(4), 5u);
}

} // namespace
} // namespace longhaul
