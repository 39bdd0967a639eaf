// Unit tests of the core's data structures: interval set, sent-packet table, send stream,
// ACK tracker and receive stream.
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/interval_set.h"
#include "transport/base/rng.h"
#include "transport/core/recv/ack_tracker.h"
#include "transport/core/recv/receive_stream.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {
namespace {

TEST(IntervalSetTest, MatchesABruteForceModel) {
  Rng r(1);
  IntervalSet s;
  std::set<uint64_t> model;
  for (int i = 0; i < 3000; ++i) {
    uint64_t a = r.UniformInt(500), b = a + r.UniformInt(20);
    if (r.Bernoulli(0.7)) {
      uint64_t fresh = 0;
      for (uint64_t v = a; v < b; ++v) fresh += model.insert(v).second;
      EXPECT_EQ(s.Add(a, b), fresh);
    } else {
      s.Remove(a, b);
      for (uint64_t v = a; v < b; ++v) model.erase(v);
    }
    ASSERT_EQ(s.total(), model.size());
  }
  for (uint64_t v = 0; v < 530; ++v) EXPECT_EQ(s.Contains(v), model.count(v) == 1) << v;
  // Intervals are disjoint and not adjacent.
  uint64_t prev_end = 0;
  bool first = true;
  for (auto [a, b] : s.intervals()) {
    EXPECT_LT(a, b);
    if (!first) {
      EXPECT_GT(a, prev_end);
    }
    prev_end = b;
    first = false;
  }
  s.EraseBelow(250);
  for (uint64_t v = 0; v < 250; ++v) EXPECT_FALSE(s.Contains(v));
}

TEST(SentPacketTableTest, FindOutstandingSkipsFinishedPackets) {
  SentPacketTable t;
  for (int i = 0; i < 5000; ++i) t.Add();  // grows past the initial ring
  EXPECT_EQ(t.FindOutstanding(0), 0u);
  for (PacketNumber pn = 0; pn < 5000; ++pn) {
    if (pn % 7 != 0) t.Finish(pn);
  }
  EXPECT_EQ(t.FindOutstanding(1), 7u);
  EXPECT_EQ(t.FindOutstanding(7), 7u);
  EXPECT_EQ(t.FindOutstanding(4999), 5000u);
  t.Finish(7);
  EXPECT_EQ(t.FindOutstanding(0), 0u);
  EXPECT_EQ(t.FindOutstanding(1), 14u);
  t.ReleaseFront([](const SentPacket& p) { return p.finished; });
  EXPECT_EQ(t.base(), 0u);  // packet 0 is outstanding
  t.Finish(0);
  t.ReleaseFront([](const SentPacket& p) { return p.finished; });
  EXPECT_EQ(t.base(), 14u);
}

TEST(SentPacketTableTest, UnackedWalkSeesLostPackets) {
  SentPacketTable t;
  for (int i = 0; i < 10; ++i) t.Add();
  t.Finish(3);  // lost
  t.Get(3).lost = true;
  t.Finish(4);
  t.MarkAcked(4);
  EXPECT_EQ(t.FindOutstanding(3), 5u);
  EXPECT_EQ(t.FindUnacked(3), 3u);
  EXPECT_EQ(t.FindUnacked(4), 5u);
}

TEST(SendStreamTest, UnitsMessagesAndCompletionOrder) {
  SendStream s;
  uint8_t buf[100] = {};
  EXPECT_EQ(s.Push(buf, 10, nullptr, 1), 0u);
  EXPECT_EQ(s.Push(nullptr, 0, nullptr, 2), 1u);  // zero bytes: one unit
  EXPECT_EQ(s.Push(buf, 30, nullptr, 3), 2u);
  EXPECT_EQ(s.stream_end(), 41u);
  uint64_t start, units;
  ASSERT_TRUE(s.TakeUnsent(100, 1000, &start, &units));  // stops at the message end
  EXPECT_EQ(start, 0u);
  EXPECT_EQ(units, 10u);
  ASSERT_TRUE(s.TakeUnsent(100, 1000, &start, &units));
  EXPECT_EQ(units, 1u);
  MessagePiece p = s.PieceAt(10, 1);
  EXPECT_EQ(p.length, 0u);
  EXPECT_TRUE(p.last);
  ASSERT_TRUE(s.TakeUnsent(100, 20, &start, &units));  // flow-control limit
  EXPECT_EQ(start, 11u);
  EXPECT_EQ(units, 9u);
  // Ack the third message's piece first: nothing completes (order).
  s.Ack(11, 9);
  SendMessage m;
  EXPECT_FALSE(s.PopCompleted(&m));
  s.Ack(0, 10);
  ASSERT_TRUE(s.PopCompleted(&m));
  EXPECT_EQ(m.tag, 1u);
  EXPECT_FALSE(s.PopCompleted(&m));  // message 1 not acked
  s.QueueRetransmission(10, 1);
  ASSERT_TRUE(s.TakeRetransmission(100, &start, &units));
  EXPECT_EQ(start, 10u);
  EXPECT_EQ(units, 1u);
  s.Ack(10, 1);
  ASSERT_TRUE(s.PopCompleted(&m));
  EXPECT_EQ(m.tag, 2u);
  // A queued repair of something acknowledged meanwhile is skipped.
  s.QueueRetransmission(20, 5);
  ASSERT_TRUE(s.TakeUnsent(100, 1000, &start, &units));
  s.Ack(20, 21);
  EXPECT_FALSE(s.TakeRetransmission(100, &start, &units));
  ASSERT_TRUE(s.PopCompleted(&m));
  EXPECT_EQ(m.tag, 3u);
  EXPECT_EQ(s.pending_messages(), 0u);
}

TEST(AckTrackerTest, RangesGapsAndStatistics) {
  AckTracker t(4, Duration::Milliseconds(1), 16);
  Time now = Time::FromNanoseconds(1000);
  for (PacketNumber pn : {0, 1, 2, 5, 6, 9}) EXPECT_TRUE(t.OnPacket(now, pn, true, false, true));
  EXPECT_TRUE(t.AckDue(now));  // gaps ask for an immediate ACK
  EXPECT_EQ(t.packets_missing(), 4u);  // 3, 4 and 7, 8
  EXPECT_EQ(t.loss_bursts(), 2u);
  EXPECT_TRUE(t.IsDuplicate(5));
  EXPECT_FALSE(t.IsDuplicate(4));
  EXPECT_FALSE(t.OnPacket(now, 5, true, false, false));  // duplicate
  EXPECT_TRUE(t.OnPacket(now, 4, true, false, false));   // late
  wire::AckFrame ack;
  std::vector<wire::AckRange> ranges;
  t.BuildAck(now, &ack, &ranges);
  EXPECT_EQ(ack.largest, 9u);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].low, 9u);
  EXPECT_EQ(ranges[1].low, 4u);
  EXPECT_EQ(ranges[1].high, 6u);
  EXPECT_EQ(ranges[2].low, 0u);
  EXPECT_EQ(ranges[2].high, 2u);
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
  t.OnPacket(now, 10, true, false, false);  // gap 1..9
  EXPECT_EQ(t.packets_missing(), 9u);
  EXPECT_EQ(t.loss_bursts(), 1u);
  t.OnPacket(now, 5, true, false, false);  // splits the gap
  EXPECT_EQ(t.packets_missing(), 8u);
  EXPECT_EQ(t.loss_bursts(), 2u);
  for (PacketNumber pn : {1, 2, 3, 4}) t.OnPacket(now, pn, true, false, false);
  EXPECT_EQ(t.loss_bursts(), 1u);
  for (PacketNumber pn : {6, 7, 8, 9}) t.OnPacket(now, pn, true, false, false);
  EXPECT_EQ(t.packets_missing(), 0u);
  EXPECT_EQ(t.loss_bursts(), 0u);
}

wire::DataFrame Piece(uint64_t id, uint64_t size, uint64_t off, uint64_t len, uint64_t base,
                      const uint8_t* data) {
  wire::DataFrame f;
  f.message_id = id;
  f.message_length = size;
  f.offset = off;
  f.length = len;
  f.stream_base = base;
  f.payload = data;
  f.flags = off + len == size ? wire::kDataFlagLast : 0;
  return f;
}

TEST(ReceiveStreamTest, OutOfOrderPiecesAndDuplicates) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[100];
  for (int i = 0; i < 100; ++i) src[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(*r.OnData(Piece(0, 100, 50, 50, 0, src + 50)), 50u);
  EXPECT_EQ(*r.OnData(Piece(0, 100, 40, 30, 0, src + 40)), 10u);  // overlaps
  Event e;
  EXPECT_FALSE(r.PopDelivered(&e));
  EXPECT_EQ(*r.OnData(Piece(0, 100, 0, 40, 0, src)), 40u);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.size, 100u);
  EXPECT_EQ(0, memcmp(e.data, src, 100));
  EXPECT_EQ(*r.OnData(Piece(0, 100, 0, 40, 0, src)), 0u);  // late duplicate
  EXPECT_EQ(r.max_stream(), 100u + (1 << 20));
}

TEST(ReceiveStreamTest, RejectsViolations) {
  ReceiveStream r(1000, 4);
  uint8_t src[2000] = {};
  EXPECT_EQ(r.OnData(Piece(0, 2000, 995, 10, 0, src)).status().code(),
            absl::StatusCode::kFailedPrecondition);  // beyond credit
  EXPECT_TRUE(r.OnData(Piece(1, 5000, 0, 10, 2000, src)).ok() == false);  // starts beyond
  EXPECT_EQ(r.OnData(Piece(9, 10, 0, 10, 0, src)).status().code(),
            absl::StatusCode::kFailedPrecondition);  // too many messages ahead
  ASSERT_TRUE(r.OnData(Piece(0, 10, 0, 5, 0, src)).ok());
  EXPECT_EQ(r.OnData(Piece(0, 12, 5, 5, 0, src)).status().code(),
            absl::StatusCode::kInvalidArgument);  // size changed
}

TEST(ReceiveStreamTest, PostAfterArrivalCopiesIntoThePostedBuffer) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[64];
  for (int i = 0; i < 64; ++i) src[i] = static_cast<uint8_t>(3 * i);
  ASSERT_TRUE(r.OnData(Piece(0, 64, 0, 32, 0, src)).ok());
  uint8_t dst[64] = {};
  ASSERT_TRUE(r.Post(dst, sizeof(dst), 42).ok());
  ASSERT_TRUE(r.OnData(Piece(0, 64, 32, 32, 0, src + 32)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.data, dst);
  EXPECT_EQ(e.tag, 42u);
  EXPECT_EQ(0, memcmp(dst, src, 64));
}

// Place: where a frame's payload would land, only when all of it is new and its memory
// exists; OnData then finds it in place and counts it without a copy.
TEST(ReceiveStreamTest, PlaceNamesOnlyNewBytesInExistingMemory) {
  ReceiveStream r(1 << 20, 100);
  uint8_t src[4096];
  for (int i = 0; i < 4096; ++i) src[i] = static_cast<uint8_t>(i * 13);
  // Message 0 not started, nothing posted: no memory yet (none is made for a frame
  // that has not authenticated).
  EXPECT_EQ(r.Place(Piece(0, 4096, 1024, 1024, 0, src + 1024)), nullptr);
  ASSERT_TRUE(r.OnData(Piece(0, 4096, 0, 1024, 0, src)).ok());
  uint8_t* at = r.Place(Piece(0, 4096, 2048, 1024, 0, src + 2048));
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(r.Place(Piece(0, 4096, 512, 1024, 0, src + 512)), nullptr);  // overlaps received
  EXPECT_EQ(r.Place(Piece(0, 4000, 2048, 1024, 0, src)), nullptr);       // other size
  EXPECT_EQ(r.Place(Piece(0, 4096, 2048, 1024, 7, src)), nullptr);       // other position
  EXPECT_EQ(r.Place(Piece(0, 4096, 3584, 1024, 0, src)), nullptr);       // past the end
  // The opener decrypts into `at`; OnData finds the payload in place.
  std::memcpy(at, src + 2048, 1024);
  EXPECT_EQ(*r.OnData(Piece(0, 4096, 2048, 1024, 0, at)), 1024u);
  // Out of order now: a range between the two received ones is new, one touching
  // either is not.
  EXPECT_NE(r.Place(Piece(0, 4096, 1024, 1024, 0, src)), nullptr);
  EXPECT_EQ(r.Place(Piece(0, 4096, 1500, 1024, 0, src)), nullptr);
  EXPECT_EQ(r.Place(Piece(0, 4096, 3000, 1000, 0, src)), nullptr);
  ASSERT_TRUE(r.OnData(Piece(0, 4096, 1024, 1024, 0, src + 1024)).ok());
  ASSERT_TRUE(r.OnData(Piece(0, 4096, 3072, 1024, 0, src + 3072)).ok());
  EXPECT_EQ(r.Place(Piece(0, 4096, 3072, 1024, 0, src)), nullptr);  // complete
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(0, memcmp(e.data, src, 4096));
  EXPECT_EQ(r.Place(Piece(0, 4096, 0, 1024, 0, src)), nullptr);  // delivered
  // A posted buffer takes a message's first piece.
  uint8_t dst[2048] = {};
  ASSERT_TRUE(r.Post(dst, sizeof(dst), 5).ok());
  EXPECT_EQ(r.Place(Piece(1, 2048, 1024, 1024, 4096, src)), dst + 1024);
  EXPECT_EQ(r.Place(Piece(1, 4096, 0, 1024, 4096, src)), nullptr);  // does not fit it
  // Beyond the receive credit: nothing.
  ReceiveStream small(1000, 4);
  uint8_t buf[4096];
  ASSERT_TRUE(small.Post(buf, sizeof(buf), 1).ok());
  EXPECT_NE(small.Place(Piece(0, 4096, 0, 900, 0, src)), nullptr);
  EXPECT_EQ(small.Place(Piece(0, 4096, 500, 900, 0, src)), nullptr);
}

TEST(IntervalSetTest, OverlapsMatchesABruteForceModel) {
  Rng r(3);
  IntervalSet s;
  std::set<uint64_t> model;
  for (int i = 0; i < 40; ++i) {
    const uint64_t a = r.UniformInt(300), b = a + r.UniformInt(15);
    s.Add(a, b);
    for (uint64_t v = a; v < b; ++v) model.insert(v);
  }
  for (uint64_t a = 0; a < 320; ++a) {
    for (uint64_t b = a; b < a + 20; ++b) {
      bool any = false;
      for (uint64_t v = a; v < b; ++v) any = any || model.count(v) == 1;
      ASSERT_EQ(s.Overlaps(a, b), any) << a << " " << b;
    }
  }
}

}  // namespace
}  // namespace longhaul
