// The foundation's and FEC's bulk goodput targets on the Tokyo-Singapore link
// (100 Gbit/s, 58 ms RTT), 20 GiB each, as in docs/benchmarks.md (tier `sim`). Two of them
// run again with whole endpoints per side (ScenarioOptions::nodes = kEndpoint): handshake
// over the link, every packet sealed (pre-shared key, static keys), same bands.
#include <string>

#include "gtest/gtest.h"
#include "transport/base/clock.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kGiB = ByteCount{1} << 30;

struct Case {
  const char* link;
  FecMode fec;
  double min_fraction;  // of the link rate
  NodeKind nodes = NodeKind::kConnection;
  EndpointSecurity security = EndpointSecurity::kNone;
};

class BulkAcceptanceTest : public ::testing::TestWithParam<Case> {};

TEST_P(BulkAcceptanceTest, GoodputBand) {
  const Case& c = GetParam();
  ScenarioOptions o;
  absl::StatusOr<LinkSpec> spec = ParseLinkSpec(c.link, {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  o.link = *spec;
  o.sender_config.rate = o.link.rate;
  o.sender_config.segment = TransportConfig::SegmentForMtu(o.link.mtu);
  o.sender_config.fec = c.fec;
  o.receiver_config = o.sender_config;
  o.bytes = 20 * kGiB;
  o.max_virtual_time = Duration::Seconds(30);
  o.max_wall_time = Duration::Seconds(600);
  o.wall_seconds = MonotonicSeconds;  // the wall-time bound
  o.nodes = c.nodes;
  o.security = c.security;
  absl::StatusOr<ScenarioResult> r = RunScenario(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop_reason, "done");
  EXPECT_TRUE(r->delivered_intact) << r->error;
  EXPECT_GE(r->goodput_bps, c.min_fraction * o.link.rate.bps())
      << c.link << " fec=" << FecModeName(c.fec) << " nodes=" << NodeKindName(c.nodes)
      << " security=" << EndpointSecurityName(c.security);
  if (c.nodes == NodeKind::kEndpoint) {
    EXPECT_GE(r->handshake_max_s, o.link.rtt.seconds());
    EXPECT_GE(r->client_total.packets_sealed, r->sender_total.data_packets_sent);
    EXPECT_GT(r->server_total.packets_opened, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    TokyoSingapore, BulkAcceptanceTest,
    ::testing::Values(Case{"rate=100gbit,rtt=58ms", FecMode::kOff, 0.97},
                      Case{"rate=100gbit,rtt=58ms,loss=1e-4", FecMode::kOff, 0.95},
                      Case{"rate=100gbit,rtt=58ms,loss=1e-2", FecMode::kOff, 0.90},
                      Case{"rate=100gbit,rtt=58ms", FecMode::kAuto, 0.97},
                      Case{"rate=100gbit,rtt=58ms,loss=1e-2", FecMode::kAuto, 0.90},
                      Case{"rate=100gbit,rtt=58ms", FecMode::kOff, 0.97, NodeKind::kEndpoint,
                           EndpointSecurity::kPsk},
                      Case{"rate=100gbit,rtt=58ms,loss=1e-4", FecMode::kOff, 0.95,
                           NodeKind::kEndpoint, EndpointSecurity::kStaticKeys}));

}  // namespace
}  // namespace longhaul::sim
