// Unordered delivery (SendBuffer::unordered, DATA flag kDataFlagUnordered): a complete
// unordered message is delivered before earlier messages that are still missing pieces;
// ordered messages still wait for everything before them. First the receiver's
// reassembly with synthetic frames, then whole connections over the ConnectionPair pipe
// with packets dropped on purpose.
#include <cstring>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_config.h"
#include "tests/support/wire_packets.h"
#include "transport/base/rng.h"
#include "transport/core/connection.h"
#include "transport/core/recv/receive_stream.h"
#include "transport/testing/connection_pair.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

using testing::DataPiece;
using testing::IsDataPacket;
using testing::Pattern;
using testing::PipeTestConfig;

TEST(UnorderedReceiveTest, CompleteUnorderedMessagePassesAMissingEarlierOne) {
  ReceiveStream r(1 << 20, 100);
  auto m0 = Pattern(100, 1), m1 = Pattern(50, 2), m2 = Pattern(30, 3);
  // Message 0 (units 0..99) is missing its first half; 1 (100..149) and 2 (150..179)
  // arrive whole.
  ASSERT_TRUE(r.OnData(DataPiece(0, 100, 50, 50, 0, m0.data() + 50, true)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(2, 30, 0, 30, 150, m2.data(), true)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(1, 50, 0, 50, 100, m1.data(), true)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 2u);  // in order of completion
  ASSERT_EQ(e.size, 30u);
  EXPECT_EQ(0, std::memcmp(e.data, m2.data(), 30));
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 1u);
  EXPECT_EQ(0, std::memcmp(e.data, m1.data(), 50));
  EXPECT_FALSE(r.PopDelivered(&e));
  // The credit still counts from the first missing unit (unit 0): the reassembly span
  // stays bounded by the window.
  EXPECT_EQ(r.max_stream(), 0u + (1 << 20));
  // A late duplicate of a delivered message is ignored.
  EXPECT_EQ(*r.OnData(DataPiece(1, 50, 0, 50, 100, m1.data(), true)), 0u);
  EXPECT_FALSE(r.PopDelivered(&e));
  // The missing half completes message 0; then the frontier moves past 1 and 2.
  ASSERT_TRUE(r.OnData(DataPiece(0, 100, 0, 50, 0, m0.data(), true)).ok());
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 0u);
  EXPECT_EQ(0, std::memcmp(e.data, m0.data(), 100));
  EXPECT_FALSE(r.PopDelivered(&e));
  EXPECT_EQ(r.max_stream(), 180u + (1 << 20));
}

TEST(UnorderedReceiveTest, OrderedMessageWaitsForEveryEarlierMessage) {
  ReceiveStream r(1 << 20, 100);
  auto m0 = Pattern(10, 1), m1 = Pattern(10, 2), m2 = Pattern(10, 3);
  ASSERT_TRUE(r.OnData(DataPiece(2, 10, 0, 10, 20, m2.data(), false)).ok());  // ordered
  ASSERT_TRUE(r.OnData(DataPiece(1, 10, 0, 10, 10, m1.data(), true)).ok());   // unordered
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 1u);
  EXPECT_FALSE(r.PopDelivered(&e)) << "ordered message 2 must wait for message 0";
  ASSERT_TRUE(r.OnData(DataPiece(0, 10, 0, 10, 0, m0.data(), false)).ok());
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 0u);
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 2u);
  EXPECT_EQ(0, std::memcmp(e.data, m2.data(), 10));
  EXPECT_FALSE(r.PopDelivered(&e));
}

TEST(UnorderedReceiveTest, PostedBuffersMatchMessageIdsAndSkipDeliveredOnes) {
  ReceiveStream r(1 << 20, 100);
  auto m0 = Pattern(8, 1), m1 = Pattern(8, 2), m2 = Pattern(8, 3), m3 = Pattern(8, 4);
  uint8_t b0[8] = {}, b1[8] = {};
  ASSERT_TRUE(r.Post(b0, sizeof(b0), 100).ok());  // for message 0
  // Message 2 arrives in owned memory and is delivered before 0 and 1.
  ASSERT_TRUE(r.OnData(DataPiece(2, 8, 0, 8, 16, m2.data(), true)).ok());
  Event e;
  ASSERT_TRUE(r.PopDelivered(&e));
  EXPECT_EQ(e.message_id, 2u);
  EXPECT_TRUE(e.owned);
  EXPECT_EQ(e.tag, 0u);
  ASSERT_TRUE(r.Post(b1, sizeof(b1), 101).ok());  // for message 1
  uint8_t b3[8] = {};
  ASSERT_TRUE(r.Post(b3, sizeof(b3), 103).ok());  // 2 was delivered: for message 3
  ASSERT_TRUE(r.OnData(DataPiece(3, 8, 0, 8, 24, m3.data(), true)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(1, 8, 0, 8, 8, m1.data(), true)).ok());
  ASSERT_TRUE(r.OnData(DataPiece(0, 8, 0, 8, 0, m0.data(), true)).ok());
  std::map<uint64_t, Event> got;
  while (r.PopDelivered(&e)) got[e.message_id] = std::move(e);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data, b0);
  EXPECT_EQ(got[0].tag, 100u);
  EXPECT_EQ(got[1].data, b1);
  EXPECT_EQ(got[1].tag, 101u);
  EXPECT_EQ(got[3].data, b3);
  EXPECT_EQ(got[3].tag, 103u);
  EXPECT_EQ(0, std::memcmp(b0, m0.data(), 8));
  EXPECT_EQ(0, std::memcmp(b1, m1.data(), 8));
  EXPECT_EQ(0, std::memcmp(b3, m3.data(), 8));
  EXPECT_EQ(r.posted_count(), 0u);
}

TEST(UnorderedReceiveTest, ChangingTheOrderingFlagIsAViolationAndCloseSkipsDelivered) {
  ReceiveStream r(1 << 20, 100);
  auto m = Pattern(20, 1);
  ASSERT_TRUE(r.OnData(DataPiece(0, 20, 0, 10, 0, m.data(), true)).ok());
  auto bad = r.OnData(DataPiece(0, 20, 10, 10, 0, m.data() + 10, false));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ordering"), std::string::npos) << bad.status();

  ReceiveStream c(1 << 20, 100);
  uint8_t b0[20], b1[20];
  ASSERT_TRUE(c.Post(b0, sizeof(b0), 7).ok());
  ASSERT_TRUE(c.Post(b1, sizeof(b1), 8).ok());
  ASSERT_TRUE(c.OnData(DataPiece(1, 20, 0, 20, 20, m.data(), true)).ok());
  Event e;
  ASSERT_TRUE(c.PopDelivered(&e));
  EXPECT_EQ(e.tag, 8u);
  // Closing cancels only the buffer of message 0; message 1's was used.
  ASSERT_TRUE(c.PopCancelledPost(absl::CancelledError("closed"), &e));
  EXPECT_EQ(e.tag, 7u);
  EXPECT_EQ(e.data, b0);
  EXPECT_FALSE(c.PopCancelledPost(absl::CancelledError("closed"), &e));
}

TEST(UnorderedWireTest, FlagRoundTripsAndUnknownBitsStayMalformed) {
  uint8_t buf[2048];
  uint8_t payload[5] = {1, 2, 3, 4, 5};
  wire::PacketWriter w(buf, sizeof(buf));
  wire::PacketHeader h;
  h.connection_id = 9;
  h.packet_number = 3;
  w.WriteHeader(h);
  ASSERT_NE(w.WriteData(DataPiece(4, 5, 0, 5, 40, payload, true)), nullptr);
  const size_t n = w.Finish();
  auto view = wire::ParsePacket({buf, n});
  ASSERT_TRUE(view.ok()) << view.status();
  wire::FrameReader reader(*view);
  wire::Frame f;
  ASSERT_TRUE(*reader.Next(&f));
  ASSERT_EQ(f.type, wire::FrameType::kData);
  EXPECT_TRUE(f.data.unordered());
  EXPECT_TRUE(f.data.last());
  EXPECT_EQ(f.data.message_id, 4u);
}

// ---- whole connections ----

// Two "streams" over one connection: a 200 kB message whose first data packet is lost,
// then a 100-byte message. Returns the receiver's completion order (message ids) and
// checks every byte.
std::vector<uint64_t> RunTwoStreams(bool unordered) {
  testing::ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  uint64_t data_seen = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    testing::FilterVerdict v;
    if (dir == 0 && IsDataPacket(d) && data_seen++ == 0) v.drop = true;
    return v;
  });
  auto big = Pattern(200000, 1), small = Pattern(100, 2);
  EXPECT_TRUE(p.a().Send(SendBuffer{big.data(), big.size(), nullptr, unordered}, 1).ok());
  EXPECT_TRUE(p.a().Send(SendBuffer{small.data(), small.size(), nullptr, unordered}, 2).ok());
  std::vector<uint64_t> order;
  EXPECT_TRUE(p.RunUntil(
      [&] {
        size_t n = 0;
        for (const Event& e : p.b_events()) n += e.type == Event::Type::kReceiveComplete;
        return n == 2;
      },
      Duration::Seconds(5)));
  for (const Event& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    EXPECT_TRUE(e.status.ok()) << e.status;
    const auto& want = e.message_id == 0 ? big : small;
    EXPECT_EQ(e.size, want.size());
    if (e.size == want.size()) {
      EXPECT_EQ(0, std::memcmp(e.data, want.data(), e.size));
    }
    order.push_back(e.message_id);
  }
  EXPECT_EQ(p.a().stats().packets_retransmitted, 1u);
  return order;
}

TEST(UnorderedConnectionTest, ALostPacketHoldsBackOnlyItsOwnMessage) {
  EXPECT_EQ(RunTwoStreams(/*unordered=*/true), (std::vector<uint64_t>{1, 0}));
}

TEST(UnorderedConnectionTest, OrderedMessagesStillWaitForTheRepair) {
  EXPECT_EQ(RunTwoStreams(/*unordered=*/false), (std::vector<uint64_t>{0, 1}));
}

TEST(UnorderedConnectionTest, ManyInterleavedStreamsUnderLossArriveIntact) {
  // 40 messages of 0..40 kB, every 7th data packet dropped and some reordered: each
  // arrives intact exactly once, and send completions come in submission order.
  testing::ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  uint64_t n = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    testing::FilterVerdict v;
    if (dir == 0 && IsDataPacket(d)) {
      const uint64_t i = n++;
      v.drop = i % 7 == 3;
      if (i % 11 == 5) v.extra_delay = Duration::Milliseconds(3);
    }
    return v;
  });
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < 40; ++i) msgs.push_back(Pattern((i * 997) % 40000, 10 + i));
  for (size_t i = 0; i < msgs.size(); ++i) {
    ASSERT_TRUE(p.a().Send(SendBuffer{msgs[i].data(), msgs[i].size(), nullptr, i % 4 != 0}, i).ok());
  }
  EXPECT_EQ(p.a().stream_units_submitted(), [&] {
    uint64_t u = 0;
    for (auto& m : msgs) u += m.empty() ? 1 : m.size();
    return u;
  }());
  EXPECT_EQ(p.a().stream_units_sent(), 0u);
  ASSERT_TRUE(p.RunUntil(
      [&] {
        size_t r = 0, s = 0;
        for (const Event& e : p.b_events()) r += e.type == Event::Type::kReceiveComplete;
        for (const Event& e : p.a_events()) s += e.type == Event::Type::kSendComplete;
        return r == msgs.size() && s == msgs.size();
      },
      Duration::Seconds(10)));
  EXPECT_EQ(p.a().stream_units_sent(), p.a().stream_units_submitted());
  std::vector<int> seen(msgs.size(), 0);
  bool out_of_order = false;
  uint64_t last = 0;
  for (const Event& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_LT(e.message_id, msgs.size());
    ++seen[e.message_id];
    if (e.message_id < last) out_of_order = true;
    last = e.message_id;
    ASSERT_EQ(e.size, msgs[e.message_id].size());
    if (e.size) {
      EXPECT_EQ(0, std::memcmp(e.data, msgs[e.message_id].data(), e.size));
    }
  }
  for (size_t i = 0; i < msgs.size(); ++i) EXPECT_EQ(seen[i], 1) << "message " << i;
  EXPECT_TRUE(out_of_order) << "losses should have let later messages pass earlier ones";
  uint64_t expect = 0;
  for (const Event& e : p.a_events()) {
    if (e.type == Event::Type::kSendComplete) {
      EXPECT_EQ(e.message_id, expect++);
    }
  }
  EXPECT_GT(p.a().stats().packets_retransmitted, 0u);
}

}  // namespace
}  // namespace longhaul
