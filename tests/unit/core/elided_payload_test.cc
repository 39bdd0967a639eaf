// TransportConfig::elide_payload (the simulator's payload-free mode) through two
// Connections: the same protocol with stamps instead of bytes, each message's stamp
// digest reported, sizes counted as if the bytes were there; and an endpoint without the
// mode refusing elided frames.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pattern.h"
#include "tests/support/test_config.h"
#include "transport/base/rng.h"
#include "transport/core/connection.h"
#include "transport/testing/connection_pair.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

using testing::ConnectionPair;
using testing::FilterVerdict;
using testing::Pattern;

TransportConfig ElidedConfig() {
  TransportConfig c = testing::PipeTestConfig();
  c.segment = 8000;
  c.tail_protect = TransportConfig().tail_protect;
  c.elide_payload = true;
  return c;
}

struct ElidedRun {
  std::vector<std::vector<uint8_t>> messages;
  std::vector<size_t> datagram_sizes;  // a -> b
};

// Sends `sizes` from a to b and checks order, sizes and every message's stamp digest.
void SendAndCheckDigests(ConnectionPair& p, const std::vector<size_t>& sizes, ElidedRun* run) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    run->messages.push_back(Pattern(sizes[i], i + 11));
    ASSERT_TRUE(p.a().Send(SendBuffer{run->messages.back().data(), sizes[i]}, i).ok());
  }
  auto received = [&] {
    size_t n = 0;
    for (const Event& e : p.b_events()) n += e.type == Event::Type::kReceiveComplete;
    return n;
  };
  ASSERT_TRUE(p.RunUntil([&] { return received() == sizes.size(); }, Duration::Seconds(10)));
  size_t k = 0;
  for (const Event& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_TRUE(e.status.ok()) << e.status;
    EXPECT_EQ(e.message_id, k);
    EXPECT_EQ(e.size, sizes[k]);
    EXPECT_FALSE(e.owned) << "no memory is allocated for elided messages";
    EXPECT_EQ(e.stamp_digest, wire::MessageStampDigest(run->messages[k].data(), sizes[k]))
        << "message " << k;
    ++k;
  }
}

TEST(ElidedPayloadTest, DeliversThroughLossAndFecWithDigestsAndFullSizes) {
  TransportConfig c = ElidedConfig();
  c.fec = FecMode::kFixed;
  c.fec_k = 8;
  c.fec_m = 2;
  c.fec_interleave = 2;
  ConnectionPair p(c, c);
  ElidedRun run;
  uint64_t seen = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir == 0) {
      run.datagram_sizes.push_back(d.size());
      const uint64_t i = seen++;
      // Single losses (FEC rebuilds them) and a run of five (selective repeat).
      v.drop = i == 5 || i == 31 || (i >= 60 && i < 65);
    }
    return v;
  });
  SendAndCheckDigests(p, {3 << 20, 5, 0, 100000, 4097}, &run);
  EXPECT_GT(p.b().stats().fec_recovered_packets, 0u);
  EXPECT_GT(p.a().stats().packets_retransmitted, 0u);
  // The datagrams are short, but every count says what they stand for.
  size_t longest = 0;
  for (size_t s : run.datagram_sizes) longest = std::max(longest, s);
  EXPECT_LT(longest, 200u);
  const ConnectionStats& s = p.a().stats();
  EXPECT_GE(s.bytes_sent, s.data_bytes_sent);
  EXPECT_GT(s.data_bytes_sent, ByteCount{3} << 20);
  EXPECT_GT(s.fec_overhead_bytes, s.fec_repair_packets_sent * 8000);  // full-size repairs
}

TEST(ElidedPayloadTest, TheDigestCatchesAStampAtTheWrongPlace) {
  // Hand-built elided frames for one 10000-byte message: [0, 5000) and [5000, 10000),
  // whose stamps (0, 4096 | 8192) come from the message; a second receiver gets the
  // second piece with its stamp taken from position 4096 instead of 8192.
  const std::vector<uint8_t> m = Pattern(10000, 5);
  auto deliver = [&](const uint8_t* second_stamp) {
    TransportConfig c = ElidedConfig();
    Connection conn(c, ConnectionIds{1, 2}, 1, Time::FromNanoseconds(1));
    for (int piece = 0; piece < 2; ++piece) {
      std::vector<uint8_t> buf(c.MaxDatagramSize());
      wire::PacketWriter w(buf.data(), buf.size());
      w.set_elide_payload(true);
      w.WriteHeader(wire::PacketHeader{wire::PacketType::kOneRtt, 0, 1,
                                       static_cast<PacketNumber>(piece)});
      wire::DataFrame d;
      d.flags = piece == 1 ? wire::kDataFlagLast : 0;
      d.message_length = m.size();
      d.offset = piece * 5000;
      d.length = 5000;
      std::vector<uint8_t> source(m.begin() + d.offset, m.begin() + d.offset + d.length);
      if (piece == 1) std::copy(second_stamp, second_stamp + 8, source.begin() + 3192);
      d.payload = source.data();
      EXPECT_NE(w.WriteData(d), nullptr);
      const size_t n = w.Finish();
      conn.OnDatagram(Time::FromNanoseconds(5 + piece), std::span<const uint8_t>(buf.data(), n));
    }
    Event e;
    while (conn.PollEvent(&e)) {
      if (e.type == Event::Type::kReceiveComplete) return e.stamp_digest;
    }
    ADD_FAILURE() << "message not delivered";
    return uint64_t{0};
  };
  EXPECT_EQ(deliver(m.data() + 8192), wire::MessageStampDigest(m.data(), m.size()));
  EXPECT_NE(deliver(m.data() + 4096), wire::MessageStampDigest(m.data(), m.size()));
}

TEST(ElidedPayloadTest, AnEndpointWithoutTheModeClosesOnAnElidedFrame) {
  TransportConfig sender = ElidedConfig();
  TransportConfig receiver = ElidedConfig();
  receiver.elide_payload = false;
  ConnectionPair p(sender, receiver);
  std::vector<uint8_t> m = Pattern(50000, 1);
  ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), m.size()}, 1).ok());
  ASSERT_TRUE(p.RunUntil([&] { return p.b().closed(); }, Duration::Seconds(5)));
  std::string why;
  for (const Event& e : p.b_events()) {
    EXPECT_NE(e.type, Event::Type::kReceiveComplete);
    if (e.type == Event::Type::kClosed) why = std::string(e.status.message());
  }
  EXPECT_NE(why.find("elided payload"), std::string::npos) << why;
}

}  // namespace
}  // namespace longhaul
