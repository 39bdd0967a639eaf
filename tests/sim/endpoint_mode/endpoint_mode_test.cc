// The scenario runner's endpoint mode (ScenarioOptions::nodes = NodeKind::kEndpoint): whole
// sans-IO endpoints per side, the handshake over the simulated link, packet protection
// with keys from the seed. Intact delivery with and without protection, goodput close to
// bare connections', handshake time of at least one round trip, lossy links, several
// staggered connections, the messages workload, sealing shown by the endpoints' counters
// and by corrupted packets that fail to authenticate, and the same run for the same seed.
#include <string>

#include "gtest/gtest.h"
#include "transport/sim/link_spec.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kMiB = ByteCount{1} << 20;

ScenarioOptions Options(const std::string& link, EndpointSecurity security,
                        ByteCount bytes = 64 * kMiB) {
  ScenarioOptions o;
  absl::StatusOr<LinkSpec> spec = ParseLinkSpec(link, {});
  EXPECT_TRUE(spec.ok()) << spec.status();
  o.link = *spec;
  o.sender_config.rate = o.link.rate;
  o.sender_config.segment = TransportConfig::SegmentForMtu(o.link.mtu);
  o.receiver_config = o.sender_config;
  o.bytes = bytes;
  o.max_virtual_time = Duration::Seconds(60);
  o.nodes = NodeKind::kEndpoint;
  o.security = security;
  return o;
}

ScenarioResult RunOk(const ScenarioOptions& o) {
  absl::StatusOr<ScenarioResult> r = RunScenario(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScenarioResult{};
}

class EndpointModeSecurity : public ::testing::TestWithParam<EndpointSecurity> {};

TEST_P(EndpointModeSecurity, DeliversIntactAndSealsOnlyWithProtection) {
  const ScenarioOptions o = Options("rate=1gbit,rtt=20ms", GetParam());
  const ScenarioResult r = RunOk(o);
  EXPECT_EQ(r.stop_reason, "done");
  EXPECT_TRUE(r.delivered_intact) << r.error;
  EXPECT_EQ(r.bytes_delivered, o.bytes);
  EXPECT_EQ(r.nodes, NodeKind::kEndpoint);
  EXPECT_EQ(r.security, GetParam());
  ASSERT_EQ(r.connections.size(), 1u);
  EXPECT_TRUE(r.connections[0].connected);
  EXPECT_EQ(r.server_total.connections_accepted, 1u);
  EXPECT_GE(r.server_total.hellos_received, 1u);
  if (GetParam() == EndpointSecurity::kNone) {
    EXPECT_EQ(r.client_total.packets_sealed, 0u);
    EXPECT_EQ(r.server_total.packets_opened, 0u);
  } else {
    // Every data packet the client sent was sealed and the server opened them; the
    // server's ACKs go sealed the other way.
    EXPECT_GE(r.client_total.packets_sealed, r.sender_total.data_packets_sent);
    EXPECT_GE(r.server_total.packets_opened, r.receiver_total.packets_received);
    EXPECT_GT(r.server_total.packets_sealed, 0u);
    EXPECT_GT(r.client_total.packets_opened, 0u);
    EXPECT_EQ(r.client_total.auth_failures + r.server_total.auth_failures, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Security, EndpointModeSecurity,
                         ::testing::Values(EndpointSecurity::kNone, EndpointSecurity::kPsk,
                                           EndpointSecurity::kStaticKeys),
                         [](const auto& info) {
                           return std::string(EndpointSecurityName(info.param));
                         });

TEST(EndpointMode, GoodputOnACleanLinkIsCloseToBareConnections) {
  ScenarioOptions o = Options("rate=10gbit,rtt=20ms", EndpointSecurity::kPsk, 512 * kMiB);
  const ScenarioResult endpoints = RunOk(o);
  o.nodes = NodeKind::kConnection;
  o.security = EndpointSecurity::kNone;
  const ScenarioResult bare = RunOk(o);
  ASSERT_TRUE(endpoints.delivered_intact) << endpoints.error;
  ASSERT_TRUE(bare.delivered_intact) << bare.error;
  // Goodput counts from the first datagram after the handshake; sealed packets carry
  // 12 bytes less payload (the tag instead of a CRC32C), so a little less is expected.
  EXPECT_GT(endpoints.goodput_bps, 0.97 * bare.goodput_bps);
  EXPECT_LT(endpoints.goodput_bps, 1.02 * bare.goodput_bps);
  // The handshake (and only it) comes on top of the bare connections' virtual time.
  EXPECT_GT(endpoints.virtual_s, bare.virtual_s);
}

TEST(EndpointMode, HandshakeTakesAtLeastOneRoundTrip) {
  // Hello, Retry, Hello with the cookie, Accept: two round trips on a clean link.
  const ScenarioResult r = RunOk(Options("rate=1gbit,rtt=58ms", EndpointSecurity::kStaticKeys,
                                       4 * kMiB));
  ASSERT_TRUE(r.delivered_intact) << r.error;
  EXPECT_GE(r.handshake_max_s, 0.058);
  EXPECT_GE(r.handshake_max_s, 2 * 0.058);
  EXPECT_LT(r.handshake_max_s, 2 * 0.058 + 0.005);
  EXPECT_DOUBLE_EQ(r.handshake_mean_s, r.handshake_max_s);
  EXPECT_EQ(r.connections[0].handshake_s, r.handshake_max_s);
  // The data phase starts at the handshake's end.
  EXPECT_GE(r.connections[0].first_send, Time::Zero() + Duration::Milliseconds(116));
}

TEST(EndpointMode, LossyLinksStillComplete) {
  // 1% loss for a bulk transfer; then heavy loss, which the handshake retries through.
  for (const char* link : {"rate=1gbit,rtt=30ms,loss=1e-2", "rate=100mbit,rtt=20ms,loss=0.2"}) {
    SCOPED_TRACE(link);
    const ScenarioResult r = RunOk(Options(link, EndpointSecurity::kPsk, 8 * kMiB));
    EXPECT_EQ(r.stop_reason, "done");
    EXPECT_TRUE(r.delivered_intact) << r.error;
    EXPECT_GT(r.packets_lost, 0u);
    EXPECT_GE(r.handshake_max_s, 0.020);
  }
}

TEST(EndpointMode, CorruptedSealedPacketsFailToAuthenticate) {
  // The link flips a bit in 1% of the datagrams: with protection they do not open (and
  // are repaired like losses); the data still arrives intact.
  const ScenarioResult r =
      RunOk(Options("rate=1gbit,rtt=10ms,corrupt=0.01", EndpointSecurity::kPsk, 16 * kMiB));
  EXPECT_TRUE(r.delivered_intact) << r.error;
  EXPECT_GT(r.forward.corrupted, 0u);
  EXPECT_GT(r.server_total.auth_failures, 0u);
  EXPECT_EQ(r.receiver_total.checksum_failures, 0u);  // no CRC32C on sealed packets
}

TEST(EndpointMode, StaggeredConnectionsEachHandshakeAndDeliver) {
  ScenarioOptions o = Options("rate=2gbit,rtt=20ms", EndpointSecurity::kStaticKeys, 16 * kMiB);
  o.connections = 3;
  o.stagger = Duration::Milliseconds(50);
  o.sample_interval = Duration::Milliseconds(20);
  const ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  ASSERT_EQ(r.connections.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const ConnectionResult& c = r.connections[i];
    EXPECT_TRUE(c.connected);
    EXPECT_TRUE(c.delivered_intact) << c.error;
    EXPECT_GE(c.handshake_s, 0.020);
    EXPECT_EQ(c.start, Time::Zero() + o.stagger * i);
    EXPECT_GE(c.first_send, c.start + Duration::Milliseconds(20));
    EXPECT_EQ(c.server.connections_accepted, 1u);
    EXPECT_GT(c.client.packets_sealed, 0u);
  }
  EXPECT_EQ(r.server_total.connections_accepted, 3u);
  // The time series covers the handshakes (no connection yet) and the data phase.
  ASSERT_FALSE(r.series.empty());
  EXPECT_EQ(r.series.front().connections.size(), 3u);
  double peak = 0;
  for (const IntervalSample& x : r.series) peak = std::max(peak, x.goodput_bps);
  EXPECT_GT(peak, 0.5 * o.link.rate.bps());
}

TEST(EndpointMode, MessagesWorkloadMeasuresCompletionTimes) {
  ScenarioOptions o = Options("rate=1gbit,rtt=10ms", EndpointSecurity::kPsk);
  o.workload = Workload::kMessages;
  o.message_size = 256 * 1024;
  o.messages = 50;
  o.load = 0.5;
  const ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  ASSERT_TRUE(r.has_message_times);
  EXPECT_EQ(r.mct.count, 50u);
  // Submitted after the handshake, so completion times are not inflated by it.
  EXPECT_GE(r.mct.p50_s, r.mct.ideal_s);
  EXPECT_LT(r.mct.p50_s, 4 * r.mct.ideal_s);
}

TEST(EndpointMode, SameSeedSameRun) {
  ScenarioOptions o =
      Options("rate=1gbit,rtt=20ms,loss=1e-3,reorder=0.01", EndpointSecurity::kStaticKeys,
              8 * kMiB);
  const ScenarioResult a = RunOk(o);
  const ScenarioResult b = RunOk(o);
  EXPECT_TRUE(a.delivered_intact) << a.error;
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.handshake_max_s, b.handshake_max_s);
  o.seed = 2;
  EXPECT_NE(RunOk(o).trace_hash, a.trace_hash);
}

TEST(EndpointMode, RefusesWhatItCannotRun) {
  ScenarioOptions o = Options("rate=1gbit,rtt=20ms", EndpointSecurity::kPsk);
  o.nodes = NodeKind::kConnection;  // bare connections are never sealed
  EXPECT_TRUE(absl::IsInvalidArgument(RunScenario(o).status()));
  o = Options("rate=1gbit,rtt=20ms", EndpointSecurity::kNone);
  o.payload = false;  // the endpoint reports no elided bytes to the link
  EXPECT_TRUE(absl::IsInvalidArgument(RunScenario(o).status()));
  o = Options("rate=1gbit,rtt=20ms", EndpointSecurity::kNone);
  o.sender_config.flows = o.receiver_config.flows = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(RunScenario(o).status()));
}

}  // namespace
}  // namespace longhaul::sim
