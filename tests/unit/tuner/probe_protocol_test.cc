// The probe protocol codec and the responder's logic, without sockets: round trips of
// every message, rejection of malformed input, and a responder driven with synthetic
// arrivals (trains, a loss/reorder trace, echoes, limits).
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/base/rng.h"
#include "tuner/probe/probe_protocol.h"
#include "tuner/probe/responder.h"

namespace longhaul::tuner::probe {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Encode(const ProbeMessage& m, size_t pad = 0) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(EncodeProbe(m, pad, &out).ok());
  return out;
}

ProbeMessage Msg(ProbeType t, uint32_t session, uint64_t seq) {
  ProbeMessage m;
  m.header.type = t;
  m.header.session = session;
  m.header.seq = seq;
  return m;
}

void ExpectReportEq(const TrainReport& a, const TrainReport& b) {
  auto fields = [](const TrainReport& r) {
    return std::vector<uint64_t>{r.train,      r.packets,     r.wire_bytes, r.first_wire_bytes,
                                 r.span_ns,    r.fit_rate_bps, r.duplicates, r.rx_drops,
                                 r.reordered,  r.max_extent_packets, r.max_late_ns,
                                 r.trace_packets, r.lost,     r.bursts,     r.n0x,
                                 r.n01,        r.n1x,         r.n11,        r.n1x1,
                                 r.n111,       r.triples};
  };
  EXPECT_EQ(fields(a), fields(b));
}

TEST(ProbeProtocolTest, EveryMessageRoundTrips) {
  ProbeMessage hello = Msg(ProbeType::kHello, 7, 1);
  hello.version = 1;
  ProbeMessage ack = Msg(ProbeType::kHelloAck, 7, 1);
  ack.version = 1;
  ack.max_trains = 256;
  ack.max_trace_packets = 16000000;
  ProbeMessage echo = Msg(ProbeType::kEcho, 7, 1ull << 62);
  echo.send_ns = 123456789012345;
  ProbeMessage reply = Msg(ProbeType::kEchoReply, 7, 9);
  reply.send_ns = 5;
  reply.size_received = 8972;
  reply.hold_ns = 77;
  ProbeMessage data = Msg(ProbeType::kData, 7, 42);
  data.header.flags = kFlagEcho;
  data.train = 3;
  data.data_flags = kDataTrace;
  data.send_ns = 99;
  ProbeMessage req = Msg(ProbeType::kReportReq, 7, 10);
  req.train = 3;
  req.packets_sent = 1000000;
  ProbeMessage rep = Msg(ProbeType::kReport, 7, 10);
  rep.report.train = 3;
  rep.report.packets = 1;
  rep.report.wire_bytes = 2;
  rep.report.first_wire_bytes = 3;
  rep.report.span_ns = 4;
  rep.report.fit_rate_bps = 5;
  rep.report.duplicates = 6;
  rep.report.rx_drops = 7;
  rep.report.reordered = 8;
  rep.report.max_extent_packets = 9;
  rep.report.max_late_ns = 10;
  rep.report.trace_packets = 11;
  rep.report.lost = 12;
  rep.report.bursts = 13;
  rep.report.n0x = 14;
  rep.report.n01 = 15;
  rep.report.n1x = 16;
  rep.report.n11 = 17;
  rep.report.n1x1 = 18;
  rep.report.n111 = 19;
  rep.report.triples = 20;
  ProbeMessage bye = Msg(ProbeType::kBye, 7, 0);
  ProbeMessage err = Msg(ProbeType::kError, 7, 1);
  err.error_code = 2;
  err.error_text = "responder busy";

  for (const ProbeMessage& m : {hello, ack, echo, reply, data, req, rep, bye, err}) {
    SCOPED_TRACE(ProbeTypeName(m.header.type));
    for (size_t pad : {size_t{0}, size_t{1472}}) {
      std::vector<uint8_t> bytes = Encode(m, pad);
      EXPECT_EQ(bytes[0], kProbeMagic);
      EXPECT_TRUE(IsProbeDatagram(bytes));
      EXPECT_GE(bytes.size(), std::max(pad, ProbeBodySize(m.header.type, m.error_text.size())));
      absl::StatusOr<ProbeMessage> back = DecodeProbe(bytes);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->header.type, m.header.type);
      EXPECT_EQ(back->header.flags, m.header.flags);
      EXPECT_EQ(back->header.session, m.header.session);
      EXPECT_EQ(back->header.seq, m.header.seq);
      EXPECT_EQ(back->version, m.version);
      EXPECT_EQ(back->max_trains, m.max_trains);
      EXPECT_EQ(back->max_trace_packets, m.max_trace_packets);
      EXPECT_EQ(back->send_ns, m.send_ns);
      EXPECT_EQ(back->size_received, m.size_received);
      EXPECT_EQ(back->hold_ns, m.hold_ns);
      EXPECT_EQ(back->train, m.train);
      EXPECT_EQ(back->data_flags, m.data_flags);
      EXPECT_EQ(back->packets_sent, m.packets_sent);
      ExpectReportEq(back->report, m.report);
      EXPECT_EQ(back->error_code, m.error_code);
      EXPECT_EQ(back->error_text, m.error_text);
    }
  }
}

TEST(ProbeProtocolTest, MalformedInputIsRejectedWithAReason) {
  ProbeMessage rep = Msg(ProbeType::kReport, 1, 1);
  std::vector<uint8_t> good = Encode(rep);
  // Every truncation fails cleanly.
  for (size_t n = 0; n < good.size(); ++n) {
    absl::StatusOr<ProbeMessage> r = DecodeProbe(std::span<const uint8_t>(good.data(), n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  }
  std::vector<uint8_t> bad = good;
  bad[0] = 0x01;  // a longhaul transport packet
  EXPECT_THAT(std::string(DecodeProbe(bad).status().message()), HasSubstr("not a probe message"));
  EXPECT_FALSE(IsProbeDatagram(bad));
  bad = good;
  bad[1] = 9;
  EXPECT_THAT(std::string(DecodeProbe(bad).status().message()), HasSubstr("version 9"));
  bad = good;
  bad[2] = 77;
  EXPECT_THAT(std::string(DecodeProbe(bad).status().message()), HasSubstr("unknown probe message type"));
  // Random garbage never crashes the decoder.
  Rng rng(3);
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> junk(rng.UniformInt(200));
    for (auto& b : junk) b = static_cast<uint8_t>(rng.Next());
    if (!junk.empty() && rng.Bernoulli(0.5)) junk[0] = kProbeMagic;
    if (junk.size() > 1 && rng.Bernoulli(0.5)) junk[1] = kProbeVersion;
    (void)DecodeProbe(junk);
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(EncodeProbe(rep, kMaxDatagram + 1, &out).ok());
}

class ResponderTest : public ::testing::Test {
 protected:
  std::vector<ProbeMessage> Send(const ProbeMessage& m, int64_t now_ns, size_t pad = 0,
                                 const std::string& peer = "peer-a", int64_t handled_ns = 0) {
    std::vector<std::vector<uint8_t>> replies;
    responder_.Handle(peer, Encode(m, pad), now_ns, &replies, handled_ns);
    std::vector<ProbeMessage> out;
    for (const auto& r : replies) {
      absl::StatusOr<ProbeMessage> d = DecodeProbe(r);
      EXPECT_TRUE(d.ok()) << d.status();
      if (d.ok()) out.push_back(*d);
    }
    return out;
  }
  ProbeResponder responder_{ResponderOptions{}};
};

TEST_F(ResponderTest, HelloAndEchoWithHoldTime) {
  ProbeMessage hello = Msg(ProbeType::kHello, 5, 1);
  hello.version = 1;
  std::vector<ProbeMessage> r = Send(hello, 1000);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].header.type, ProbeType::kHelloAck);
  EXPECT_EQ(r[0].header.session, 5u);
  EXPECT_EQ(responder_.sessions(), 1u);

  ProbeMessage echo = Msg(ProbeType::kEcho, 5, 99);
  echo.send_ns = 4242;
  r = Send(echo, 5000, 1400, "peer-a", 5600);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].header.type, ProbeType::kEchoReply);
  EXPECT_EQ(r[0].header.seq, 99u);
  EXPECT_EQ(r[0].send_ns, 4242u);
  EXPECT_EQ(r[0].size_received, 1400u);
  EXPECT_EQ(r[0].hold_ns, 600u);
  // Replies are small whatever the probe's size (path-MTU probes ask nothing back).
  EXPECT_LE(Encode(r[0]).size(), 64u);
}

TEST_F(ResponderTest, TrainReportHasTheDeliveryRate) {
  // 100 packets of 1222 + 28 = 1250 wire bytes, 10 us apart: 1 Gbit/s.
  for (uint64_t i = 0; i < 100; ++i) {
    ProbeMessage d = Msg(ProbeType::kData, 5, i);
    d.train = 1;
    Send(d, 1'000'000 + static_cast<int64_t>(i) * 10'000, 1222);
  }
  // A duplicate is counted, not added.
  ProbeMessage dup = Msg(ProbeType::kData, 5, 50);
  dup.train = 1;
  Send(dup, 3'000'000, 1222);
  ProbeMessage req = Msg(ProbeType::kReportReq, 5, 2);
  req.train = 1;
  req.packets_sent = 100;
  // Unpadded, the REPORT would be 6x the request: not answered (spoofable sources).
  EXPECT_TRUE(Send(req, 4'000'000).empty());
  EXPECT_EQ(responder_.stats().amplification_limited, 1u);
  std::vector<ProbeMessage> r = Send(req, 4'000'000, kReportReqPaddedSize);
  ASSERT_EQ(r.size(), 1u);
  const TrainReport& t = r[0].report;
  EXPECT_EQ(t.packets, 100u);
  EXPECT_EQ(t.duplicates, 1u);
  EXPECT_EQ(t.wire_bytes, 125000u);
  EXPECT_EQ(t.span_ns, 990'000u);
  EXPECT_NEAR(static_cast<double>(t.fit_rate_bps), 1e9, 1e3);
  EXPECT_EQ(t.trace_packets, 0u);  // not a trace train
  // An unknown train reports nothing received.
  req.train = 9;
  r = Send(req, 4'000'001, kReportReqPaddedSize);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].report.packets, 0u);
}

TEST_F(ResponderTest, TraceTrainReportsLossCountsAndReordering) {
  // 1000 packets; 10..12 and 500 lost; 700 arrives after 701..705.
  std::vector<uint64_t> order;
  for (uint64_t i = 0; i < 1000; ++i) {
    if ((i >= 10 && i <= 12) || i == 500 || i == 700) continue;
    order.push_back(i);
    if (i == 705) order.push_back(700);
  }
  int64_t t = 0;
  for (uint64_t seq : order) {
    ProbeMessage d = Msg(ProbeType::kData, 5, seq);
    d.train = 2;
    d.data_flags = kDataTrace;
    Send(d, t += 1000, 100);
  }
  ProbeMessage req = Msg(ProbeType::kReportReq, 5, 3);
  req.train = 2;
  req.packets_sent = 1002;  // the last two never arrived
  std::vector<ProbeMessage> r = Send(req, t + 1, kReportReqPaddedSize);
  ASSERT_EQ(r.size(), 1u);
  const TrainReport& rep = r[0].report;
  EXPECT_EQ(rep.trace_packets, 1002u);
  EXPECT_EQ(rep.lost, 6u);
  EXPECT_EQ(rep.bursts, 3u);
  EXPECT_EQ(rep.reordered, 1u);
  EXPECT_EQ(rep.max_extent_packets, 5u);
  EXPECT_EQ(rep.max_late_ns, 5000u);
}

TEST_F(ResponderTest, LimitsAreRefusedWithAReasonAndMalformedInputIgnored) {
  ResponderOptions o;
  o.max_sessions = 2;
  o.max_trains = 1;
  ProbeResponder small(o);
  std::vector<std::vector<uint8_t>> replies;
  ProbeMessage hello = Msg(ProbeType::kHello, 1, 1);
  small.Handle("a", Encode(hello), 1, &replies);
  small.Handle("b", Encode(hello), 2, &replies);
  replies.clear();
  small.Handle("c", Encode(hello), 3, &replies);
  ASSERT_EQ(replies.size(), 1u);
  absl::StatusOr<ProbeMessage> e = DecodeProbe(replies[0]);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->header.type, ProbeType::kError);
  EXPECT_THAT(e->error_text, HasSubstr("2 probe sessions"));
  // A second train in a session limited to one.
  ProbeMessage d = Msg(ProbeType::kData, 1, 0);
  d.train = 1;
  replies.clear();
  small.Handle("a", Encode(d), 4, &replies);
  EXPECT_TRUE(replies.empty());
  d.train = 2;
  small.Handle("a", Encode(d), 5, &replies);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_THAT(DecodeProbe(replies[0])->error_text, HasSubstr("trains"));
  // Garbage and transport packets are counted and never answered.
  replies.clear();
  const uint8_t junk[] = {0x01, 0, 0, 0, 1, 2, 3};
  small.Handle("a", junk, 6, &replies);
  small.Handle("a", std::span<const uint8_t>(), 7, &replies);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(small.stats().malformed, 2u);
  // A prober speaking a newer version hears why.
  std::vector<uint8_t> newer = Encode(hello);
  newer[1] = 2;
  small.Handle("a", newer, 8, &replies);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_THAT(DecodeProbe(replies[0])->error_text, HasSubstr("version 1"));
  EXPECT_LE(replies[0].size(), 3 * newer.size());
  // Sources are not validated: another type with a foreign version (random bytes after
  // the magic) is not answered, nor is a request too short for a reply within 3x.
  replies.clear();
  std::vector<uint8_t> other = newer;
  other[2] = static_cast<uint8_t>(ProbeType::kEcho);
  small.Handle("a", other, 8, &replies);
  EXPECT_TRUE(replies.empty());
  std::vector<uint8_t> bare(newer.begin(), newer.begin() + kHeaderSize);
  small.Handle("a", bare, 8, &replies);
  EXPECT_TRUE(replies.empty());
  EXPECT_EQ(small.stats().amplification_limited, 1u);
  // Idle sessions expire; BYE ends one at once.
  small.Handle("b", Encode(Msg(ProbeType::kBye, 1, 0)), 9, &replies);
  EXPECT_EQ(small.sessions(), 1u);
  small.Expire(9 + Duration::Seconds(31).ns());
  EXPECT_EQ(small.sessions(), 0u);
}

}  // namespace
}  // namespace longhaul::tuner::probe
