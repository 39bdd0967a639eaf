// SendStream: units, messages and the order of completions.
#include "transport/core/send/send_stream.h"

#include <vector>

#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(SendStreamTest, UnitsMessagesAndCompletionOrder) {
  SendStream s;
  uint8_t buf[100] = {};
  EXPECT_EQ(s.Push(buf, 10, nullptr, 1), 0u);
  EXPECT_EQ(s.Push(nullptr, 0, nullptr, 2), 1u); // zero bytes: one unit
  EXPECT_EQ(s.Push(buf, 30, nullptr, 3), 2u);
  EXPECT_EQ(s.stream_end(), 41u);
  uint64_t start, units;
  ASSERT_TRUE(
      s.TakeUnsent(100, 1000, &start, &units)); // stops at the message end
  EXPECT_EQ(start, 0u);
  EXPECT_EQ(units, 10u);
  ASSERT_TRUE(s.TakeUnsent(100, 1000, &start, &units));
  EXPECT_EQ(units, 1u);
  MessagePiece p = s.PieceAt(10, 1);
  EXPECT_EQ(p.length, 0u);
  EXPECT_TRUE(p.last);
  ASSERT_TRUE(s.TakeUnsent(100, 20, &start, &units)); // flow-control limit
  EXPECT_EQ(start, 11u);
  EXPECT_EQ(units, 9u);
  // Ack the third message's piece first: nothing completes (order).
  s.Ack(11, 9);
  SendMessage m;
  EXPECT_FALSE(s.PopCompleted(&m));
  s.Ack(0, 10);
  ASSERT_TRUE(s.PopCompleted(&m));
  EXPECT_EQ(m.tag, 1u);
  EXPECT_FALSE(s.PopCompleted(&m)); // message 1 not acked
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

} // namespace
} // namespace longhaul
