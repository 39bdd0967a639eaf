#include "transport/endpoint/handshake.h"

#include <vector>

#include "gtest/gtest.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint {
namespace {

HandshakeMessage SampleHello() {
  HandshakeMessage m;
  m.kind = HandshakeKind::kHello;
  m.client_cid = 0x1122334455667788ULL;
  m.params.segment = 8894;
  m.params.max_datagram = 8972;
  m.params.recv_window = uint64_t{4} << 30;
  m.params.max_inflight_messages = 65536;
  m.params.flows = 4;
  m.params.idle_timeout_ms = 30000;
  m.cookie = {1, 2, 3, 4, 5};
  m.app_data = "rate=10gbit\nfec=32,4\n";
  return m;
}

TEST(HandshakeCodec, EveryKindRoundTrips) {
  std::vector<HandshakeMessage> msgs;
  msgs.push_back(SampleHello());
  msgs.push_back({.kind = HandshakeKind::kRetry,
                  .client_cid = 42,
                  .cookie = std::vector<uint8_t>(kCookieSize, 0xab)});
  HandshakeMessage accept = SampleHello();
  accept.kind = HandshakeKind::kAccept;
  accept.server_cid = 0xdeadbeefcafef00dULL;
  accept.cookie.clear();
  msgs.push_back(accept);
  msgs.push_back({.kind = HandshakeKind::kConfirm, .client_cid = 7, .server_cid = 9});
  msgs.push_back({.kind = HandshakeKind::kReject, .client_cid = 7, .reason = "server busy"});
  for (const HandshakeMessage& m : msgs) {
    SCOPED_TRACE(HandshakeKindName(m.kind));
    absl::StatusOr<std::vector<uint8_t>> body = EncodeHandshakeBody(m);
    ASSERT_TRUE(body.ok()) << body.status();
    absl::StatusOr<HandshakeMessage> back = DecodeHandshakeBody(*body);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
    // And as whole packets, with the right packet type and connection id.
    absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(m);
    ASSERT_TRUE(pkt.ok()) << pkt.status();
    absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(*pkt);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->type, PacketTypeFor(m.kind));
    EXPECT_EQ(h->connection_id, HeaderCidFor(m));
    absl::StatusOr<HandshakeMessage> parsed = ParseHandshakePacket(*pkt);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, m);
  }
}

TEST(HandshakeCodec, HelloIsPaddedToTheMinimumInitialSize) {
  HandshakeMessage m = SampleHello();
  m.app_data.clear();
  absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(m);
  ASSERT_TRUE(pkt.ok());
  EXPECT_GE(pkt->size(), kMinInitialSize);
  // Server messages are small: far below 3x a minimum Initial.
  HandshakeMessage retry;
  retry.kind = HandshakeKind::kRetry;
  retry.cookie = std::vector<uint8_t>(kCookieSize, 1);
  absl::StatusOr<std::vector<uint8_t>> r = BuildHandshakePacket(retry);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->size(), 100u);
}

TEST(HandshakeCodec, EveryTruncationIsRejected) {
  absl::StatusOr<std::vector<uint8_t>> body = EncodeHandshakeBody(SampleHello());
  ASSERT_TRUE(body.ok());
  for (size_t n = 0; n < body->size(); ++n) {
    std::vector<uint8_t> cut(body->begin(), body->begin() + n);
    EXPECT_FALSE(DecodeHandshakeBody(cut).ok()) << "length " << n;
  }
  // Bytes after a Hello are its security fields; a lone byte is a truncated one.
  std::vector<uint8_t> longer = *body;
  longer.push_back(0);
  absl::StatusOr<HandshakeMessage> t = DecodeHandshakeBody(longer);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("truncated security fields"), std::string::npos);
  // ... and after a Retry, which has none, trailing bytes.
  HandshakeMessage retry;
  retry.kind = HandshakeKind::kRetry;
  retry.client_cid = 5;
  retry.cookie = {1, 2, 3};
  absl::StatusOr<std::vector<uint8_t>> rb = EncodeHandshakeBody(retry);
  ASSERT_TRUE(rb.ok());
  rb->push_back(0);
  t = DecodeHandshakeBody(*rb);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trailing"), std::string::npos);
}

TEST(HandshakeCodec, SecurityFieldsRoundTripAndAreBounded) {
  for (HandshakeKind k : {HandshakeKind::kHello, HandshakeKind::kAccept, HandshakeKind::kConfirm}) {
    HandshakeMessage m = SampleHello();
    m.kind = k;
    if (k != HandshakeKind::kHello) m.cookie.clear();
    if (k == HandshakeKind::kConfirm) {
      m.params = {};
      m.app_data.clear();
    }
    m.server_cid = 77;
    m.security.mode = 1;
    m.security.ciphers = 3;
    m.security.noise.assign(112, 0xab);
    absl::StatusOr<std::vector<uint8_t>> b = EncodeHandshakeBody(m);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<HandshakeMessage> d = DecodeHandshakeBody(*b);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->security, m.security) << HandshakeKindName(k);
    for (size_t n = b->size() - 115; n < b->size(); ++n) {
      std::vector<uint8_t> cut(b->begin(), b->begin() + n);
      EXPECT_FALSE(DecodeHandshakeBody(cut).ok()) << "length " << n;
    }
  }
  HandshakeMessage big = SampleHello();
  big.security.mode = 1;
  big.security.noise.assign(kMaxNoiseSize + 1, 1);
  EXPECT_FALSE(EncodeHandshakeBody(big).ok());
  // The prologue leaves the cookie and the Noise message out, and nothing else.
  HandshakeMessage a = SampleHello(), c = SampleHello();
  a.security.mode = c.security.mode = 1;
  c.cookie = {9, 9};
  c.security.noise = {1, 2, 3};
  EXPECT_EQ(HelloPrologue(a), HelloPrologue(c));
  c.app_data += "x";
  EXPECT_NE(HelloPrologue(a), HelloPrologue(c));
}

TEST(HandshakeCodec, RejectsUnknownKindAndOversizedFields) {
  std::vector<uint8_t> bad = {9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_FALSE(DecodeHandshakeBody(bad).ok());
  HandshakeMessage m = SampleHello();
  m.app_data.assign(kMaxAppDataSize + 1, 'x');
  EXPECT_FALSE(EncodeHandshakeBody(m).ok());
  m = SampleHello();
  m.cookie.assign(kMaxCookieSize + 1, 1);
  EXPECT_FALSE(EncodeHandshakeBody(m).ok());
}

TEST(HandshakeCodec, OtherVersionDecodesOnlyThePrefix) {
  HandshakeMessage m = SampleHello();
  m.version = 77;
  absl::StatusOr<std::vector<uint8_t>> body = EncodeHandshakeBody(m);
  ASSERT_TRUE(body.ok());
  // A future version may append anything after the prefix.
  body->resize(13);
  body->push_back(0xff);
  absl::StatusOr<HandshakeMessage> d = DecodeHandshakeBody(*body);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version, 77u);
  EXPECT_EQ(d->client_cid, m.client_cid);
  EXPECT_EQ(d->kind, HandshakeKind::kHello);
}

TEST(HandshakeCodec, PacketChecksAndKindMismatch) {
  absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(SampleHello());
  ASSERT_TRUE(pkt.ok());
  std::vector<uint8_t> corrupt = *pkt;
  corrupt[40] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(ParseHandshakePacket(corrupt).status()));
  // A Hello body in a Handshake-type packet is refused.
  absl::StatusOr<std::vector<uint8_t>> body = EncodeHandshakeBody(SampleHello());
  std::vector<uint8_t> buf(2000);
  wire::PacketWriter w(buf.data(), buf.size());
  wire::PacketHeader h;
  h.type = wire::PacketType::kHandshake;
  w.WriteHeader(h);
  ASSERT_TRUE(w.WriteHandshake(*body));
  buf.resize(w.Finish());
  EXPECT_FALSE(ParseHandshakePacket(buf).ok());
  // A 1-RTT packet is not a handshake packet.
  std::vector<uint8_t> one(100);
  wire::PacketWriter w1(one.data(), one.size());
  w1.WriteHeader(wire::PacketHeader{});
  ASSERT_TRUE(w1.WritePing());
  one.resize(w1.Finish());
  EXPECT_FALSE(ParseHandshakePacket(one).ok());
}

}  // namespace
}  // namespace longhaul::endpoint
