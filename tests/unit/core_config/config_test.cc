#include "transport/core/config.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul {
namespace {

using ::testing::HasSubstr;

constexpr ByteCount kIpUdpHeaders = 28;

TEST(TransportConfigTest, DefaultsAreValid) {
  absl::Status s = TransportConfig().Validate();
  EXPECT_TRUE(s.ok()) << s;
}

TEST(TransportConfigTest, DefaultsWithFecAreValid) {
  for (FecMode mode : {FecMode::kFixed, FecMode::kAuto}) {
    TransportConfig c;
    c.fec = mode;
    EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  }
}

TEST(TransportConfigTest, BbrWithoutRateCapIsValid) {
  TransportConfig c;
  c.cc = CongestionControl::kBbr;
  c.rate = Bandwidth::Zero();
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
}

struct Bad {
  const char* field;  // must appear in the error
  std::function<void(TransportConfig&)> mutate;
};

void ExpectRejected(const Bad& b) {
  TransportConfig c;
  b.mutate(c);
  absl::Status s = c.Validate();
  ASSERT_FALSE(s.ok()) << "accepted a bad " << b.field;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.field;
  EXPECT_THAT(std::string(s.message()), HasSubstr(b.field));
}

TEST(TransportConfigTest, RejectsEachOutOfRangeFieldNamingIt) {
  const Bad cases[] = {
      {"segment", [](TransportConfig& c) { c.segment = 63; }},
      {"segment", [](TransportConfig& c) { c.segment = 0; }},
      {"segment", [](TransportConfig& c) { c.segment = TransportConfig::kMaxSegment + 1; }},
      {"window", [](TransportConfig& c) { c.window = 2 * c.segment - 1; }},
      {"window", [](TransportConfig& c) { c.window = 0; }},
      {"window", [](TransportConfig& c) { c.window = TransportConfig::kMaxWindow + 1; }},
      {"recv_window", [](TransportConfig& c) { c.recv_window = 2 * c.segment - 1; }},
      {"recv_window", [](TransportConfig& c) { c.recv_window = TransportConfig::kMaxWindow + 1; }},
      {"max_inflight_messages", [](TransportConfig& c) { c.max_inflight_messages = 0; }},
      {"max_inflight_messages",
       [](TransportConfig& c) { c.max_inflight_messages = (1u << 24) + 1; }},
      {"flows", [](TransportConfig& c) { c.flows = 0; }},
      {"flows", [](TransportConfig& c) { c.flows = 257; }},
      {"rate", [](TransportConfig& c) { c.rate = Bandwidth::Zero(); }},  // cc=fixed needs a rate
      {"rate", [](TransportConfig& c) { c.rate = Bandwidth::BitsPerSecond(-1); }},
      {"rate", [](TransportConfig& c) { c.rate = Bandwidth::BitsPerSecond(10.1e12); }},
      {"rate",
       [](TransportConfig& c) {
         c.cc = CongestionControl::kBbr;
         c.rate = Bandwidth::BitsPerSecond(11e12);
       }},
      {"rate_min",
       [](TransportConfig& c) {
         c.cc = CongestionControl::kBbr;
         c.rate_min = Bandwidth::BitsPerSecond(c.rate.bps() + 1);
       }},
      {"rate_min", [](TransportConfig& c) { c.rate_min = Bandwidth::BitsPerSecond(-1); }},
      {"pacing_burst", [](TransportConfig& c) { c.pacing_burst = Duration::Nanoseconds(-1); }},
      {"pacing_burst", [](TransportConfig& c) { c.pacing_burst = Duration::Milliseconds(101); }},
      {"reorder_packets", [](TransportConfig& c) { c.reorder_packets = 0; }},
      {"reorder_packets", [](TransportConfig& c) { c.reorder_packets = (1u << 20) + 1; }},
      {"reorder_rtt_fraction", [](TransportConfig& c) { c.reorder_rtt_fraction = -0.01; }},
      {"reorder_rtt_fraction", [](TransportConfig& c) { c.reorder_rtt_fraction = 4.01; }},
      {"initial_rtt", [](TransportConfig& c) { c.initial_rtt = Duration::Zero(); }},
      {"initial_rtt", [](TransportConfig& c) { c.initial_rtt = Duration::Seconds(61); }},
      {"min_pto", [](TransportConfig& c) { c.min_pto = Duration::Zero(); }},
      {"max_pto",
       [](TransportConfig& c) {
         c.min_pto = Duration::Seconds(2);
         c.max_pto = Duration::Seconds(1);
       }},
      {"ack_every", [](TransportConfig& c) { c.ack_every = 0; }},
      {"ack_every", [](TransportConfig& c) { c.ack_every = 65537; }},
      {"max_ack_delay", [](TransportConfig& c) { c.max_ack_delay = Duration::Nanoseconds(-1); }},
      {"max_ack_delay", [](TransportConfig& c) { c.max_ack_delay = Duration::Milliseconds(1001); }},
      {"max_ack_ranges", [](TransportConfig& c) { c.max_ack_ranges = 0; }},
      {"max_ack_ranges", [](TransportConfig& c) { c.max_ack_ranges = 4097; }},
      {"fec_k",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_k = 0;
       }},
      {"fec_k",
       [](TransportConfig& c) {
         c.fec = FecMode::kAuto;
         c.fec_k = 255;
       }},
      {"fec_m",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_m = 0;
       }},
      {"fec_m",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_m = 255;
       }},
      {"fec",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_k = 200;
         c.fec_m = 56;
       }},
      {"fec_interleave",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_interleave = 0;
       }},
      {"fec_interleave",
       [](TransportConfig& c) {
         c.fec = FecMode::kFixed;
         c.fec_interleave = 1025;
       }},
      {"fec_flush", [](TransportConfig& c) { c.fec_flush = Duration::Nanoseconds(-1); }},
      {"idle_timeout", [](TransportConfig& c) { c.idle_timeout = Duration::Zero(); }},
      {"keepalive", [](TransportConfig& c) { c.keepalive = Duration::Zero(); }},
  };
  for (const Bad& b : cases) ExpectRejected(b);
}

TEST(TransportConfigTest, BoundaryValuesAreAccepted) {
  const std::vector<std::function<void(TransportConfig&)>> ok = {
      [](TransportConfig& c) { c.segment = 64; },
      [](TransportConfig& c) { c.segment = TransportConfig::kMaxSegment; },
      [](TransportConfig& c) { c.window = 2 * c.segment; },
      [](TransportConfig& c) { c.window = TransportConfig::kMaxWindow; },
      [](TransportConfig& c) { c.recv_window = 2 * c.segment; },
      [](TransportConfig& c) { c.flows = 256; },
      [](TransportConfig& c) { c.rate = Bandwidth::BitsPerSecond(10e12); },
      [](TransportConfig& c) { c.pacing_burst = Duration::Zero(); },
      [](TransportConfig& c) { c.pacing_burst = Duration::Milliseconds(100); },
      [](TransportConfig& c) { c.reorder_packets = 1u << 20; },
      [](TransportConfig& c) { c.reorder_rtt_fraction = 0; },
      [](TransportConfig& c) { c.reorder_rtt_fraction = 4; },
      [](TransportConfig& c) { c.initial_rtt = Duration::Seconds(60); },
      [](TransportConfig& c) { c.min_pto = c.max_pto; },
      [](TransportConfig& c) { c.ack_every = 65536; },
      [](TransportConfig& c) { c.max_ack_delay = Duration::Zero(); },
      [](TransportConfig& c) { c.max_ack_ranges = 4096; },
      [](TransportConfig& c) {
        c.fec = FecMode::kFixed;
        c.fec_k = 254;
        c.fec_m = 1;
        c.fec_interleave = 1024;
      },
      [](TransportConfig& c) { c.fec_flush = Duration::Zero(); },
      // With FEC off, the FEC parameters are not checked.
      [](TransportConfig& c) {
        c.fec = FecMode::kOff;
        c.fec_k = 0;
        c.fec_m = 1000;
      },
  };
  for (size_t i = 0; i < ok.size(); ++i) {
    TransportConfig c;
    ok[i](c);
    EXPECT_TRUE(c.Validate().ok()) << "case " << i << ": " << c.Validate();
  }
}

// ---------------------------------------------------------------- MTU and datagram size

TEST(TransportConfigTest, SegmentForMtuFitsTheMtuAndIsTheLargestThatDoes) {
  // The smallest MTU that holds the smallest segment.
  TransportConfig smallest;
  smallest.segment = 64;
  const ByteCount min_mtu = smallest.MaxDatagramSize() + kIpUdpHeaders;
  for (ByteCount mtu = min_mtu; mtu <= 65535; mtu += (mtu < 2000 ? 1 : 97)) {
    TransportConfig c;
    c.segment = TransportConfig::SegmentForMtu(mtu);
    ASSERT_GE(c.segment, 64u) << mtu;
    ASSERT_LE(c.segment, TransportConfig::kMaxSegment) << mtu;
    ASSERT_LE(c.MaxDatagramSize(), mtu - kIpUdpHeaders) << "mtu " << mtu;
    ASSERT_LE(c.MaxDatagramSize(), wire::kMaxDatagramSize) << mtu;
    if (c.segment < TransportConfig::kMaxSegment) {
      TransportConfig bigger = c;
      bigger.segment = c.segment + 1;
      ASSERT_GT(bigger.MaxDatagramSize(), mtu - kIpUdpHeaders) << "mtu " << mtu << " wastes space";
    }
    ASSERT_TRUE(c.Validate().ok()) << mtu << ": " << c.Validate();
  }
  EXPECT_EQ(
      TransportConfig::SegmentForMtu(1500),
      1500 - kIpUdpHeaders - (TransportConfig().MaxDatagramSize() - TransportConfig().segment));
  EXPECT_EQ(TransportConfig::SegmentForMtu(1u << 20), TransportConfig::kMaxSegment);
  EXPECT_EQ(TransportConfig::SegmentForMtu(0), 64u);
}

TEST(TransportConfigTest, MaxDatagramSizeBoundsARealPacket) {
  // The worst-case packet the sender builds for a full segment: FEC source tag plus a
  // DATA frame with full-width varints. It must not exceed MaxDatagramSize().
  for (ByteCount mtu : {ByteCount{576}, ByteCount{1500}, ByteCount{9000}, ByteCount{65535}}) {
    TransportConfig c;
    c.segment = TransportConfig::SegmentForMtu(mtu);
    std::vector<uint8_t> buf(c.MaxDatagramSize());
    std::vector<uint8_t> payload(c.segment, 0x5A);
    wire::PacketWriter w(buf.data(), buf.size());
    wire::PacketHeader h;
    h.packet_number = ~0ULL;
    h.connection_id = ~0ULL;
    w.WriteHeader(h);
    wire::FecSourceFrame src;
    src.k = 1;
    ASSERT_TRUE(w.WriteFecSource(src)) << mtu;
    wire::DataFrame d;
    d.message_id = wire::kMaxVarint;
    d.message_length = wire::kMaxVarint / 2;
    d.offset = wire::kMaxVarint / 4;
    d.stream_base = wire::kMaxVarint / 2;
    d.length = c.segment;
    d.payload = payload.data();
    ASSERT_NE(w.WriteData(d), nullptr)
        << "a full segment does not fit MaxDatagramSize() at mtu " << mtu;
    EXPECT_LE(w.Finish(), mtu - kIpUdpHeaders);
  }
}

TEST(TransportConfigTest, Names) {
  EXPECT_STREQ(CongestionControlName(CongestionControl::kFixed), "fixed");
  EXPECT_STREQ(CongestionControlName(CongestionControl::kBbr), "bbr");
  EXPECT_STREQ(FecModeName(FecMode::kOff), "off");
  EXPECT_STREQ(FecModeName(FecMode::kFixed), "fixed");
  EXPECT_STREQ(FecModeName(FecMode::kAuto), "auto");
}

}  // namespace
}  // namespace longhaul
