// The sans-IO endpoint over the simulator's link model: handshakes through lossy, bursty,
// reordering, duplicating and corrupting links, then a message carried intact, for many
// seeds; the same seed gives the same run.

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transport/sim/link_spec.h"
#include "transport/sim/simulator.h"
#include "transport/testing/endpoint_sim_node.h"

namespace longhaul::testing {
namespace {

using endpoint::EndpointEvent;

struct Outcome {
  bool connected = false;
  absl::Status failure;
  bool received_intact = false;
  uint64_t server_accepted = 0;
  int server_incoming = 0;
  uint64_t trace = 0;
  Time connected_at;
};

endpoint::PeerAddress Addr(uint8_t id) {
  const uint8_t b[2] = {0x5e, id};
  return endpoint::PeerAddress(std::span<const uint8_t>(b, 2));
}

Outcome RunOnce(const std::string& spec, uint64_t seed, ByteCount message) {
  absl::StatusOr<sim::LinkSpec> link = sim::ParseLinkSpec(spec, {});
  EXPECT_TRUE(link.ok()) << link.status();
  sim::SimulatorOptions so;
  so.link = *link;
  so.seed = seed;
  endpoint::EndpointConfig cc, sc;
  cc.seed = seed * 2 + 1;
  sc.seed = seed * 2 + 2;
  sc.cookie_secret = endpoint::SipKey{seed, ~seed};
  cc.security = sc.security = endpoint::SecurityConfig::Insecure();
  EndpointSimNode client(cc, Addr(1), Addr(2));
  EndpointSimNode server(sc, Addr(2), Addr(1));
  TransportConfig tc;
  tc.initial_rtt = link->rtt;
  tc.rate = link->rate;
  EXPECT_TRUE(server.ep().Listen(EndpointSimNode::kLocal, endpoint::ListenConfig{tc}).ok());

  std::vector<uint8_t> data(message);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + seed);
  Outcome out;
  bool sent = false;
  sim::Simulator* simp = nullptr;
  client.set_script([&] {
    for (const EndpointEvent& e : client.events()) {
      if (e.type == EndpointEvent::Type::kConnectFailed) out.failure = e.status;
      if (e.type != EndpointEvent::Type::kConnected || sent) continue;
      sent = true;
      out.connected = true;
      out.connected_at = simp->now();
      Connection* c = client.ep().ConnectionAt(e.id);
      EXPECT_TRUE(c->Send(SendBuffer{data.data(), data.size()}, 1).ok());
    }
  });
  endpoint::ConnectConfig connect;
  connect.config = tc;
  connect.timeout = Duration::Seconds(20);
  EXPECT_TRUE(client.ep()
                  .Connect(Time::Zero(), Addr(2), {EndpointSimNode::kLocal}, connect)
                  .ok());
  client.Drain();
  sim::Simulator sim(so);  // arms each node's timer at its NextTimeout()
  simp = &sim;
  sim.AddPair(&client, &server);
  sim.Run(Time::Zero() + Duration::Seconds(120), [&] {
    if (!out.failure.ok()) return true;
    for (const ConnectionEvent& e : server.connection_events()) {
      if (e.event.type == Event::Type::kReceiveComplete) {
        out.received_intact = e.event.status.ok() && e.event.size == data.size() &&
                              std::memcmp(e.event.data, data.data(), data.size()) == 0;
        return true;
      }
    }
    return false;
  });
  out.server_accepted = server.ep().counters().connections_accepted;
  for (const EndpointEvent& e : server.events()) {
    out.server_incoming += e.type == EndpointEvent::Type::kIncoming;
  }
  out.trace = sim.trace_hash();
  return out;
}

class EndpointOverLinks : public ::testing::TestWithParam<const char*> {};

TEST_P(EndpointOverLinks, HandshakeThenIntactMessageForEverySeed) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(::testing::Message() << GetParam() << " seed " << seed);
    Outcome o = RunOnce(GetParam(), seed, 2 << 20);
    ASSERT_TRUE(o.connected) << o.failure;
    EXPECT_TRUE(o.received_intact);
    EXPECT_EQ(o.server_accepted, 1u);
    EXPECT_EQ(o.server_incoming, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Links, EndpointOverLinks,
    ::testing::Values("rate=1gbit,rtt=58ms,loss=1e-3",
                      "rate=100mbit,rtt=20ms,loss=0.2",              // every fifth packet lost
                      "rate=1gbit,rtt=58ms,loss=0.1,burst=8",        // long loss bursts
                      "rate=1gbit,rtt=10ms,reorder=0.3,reorder_delay=15ms",
                      "rate=1gbit,rtt=10ms,dup=0.3",
                      "rate=1gbit,rtt=10ms,corrupt=0.05",
                      "rate=10gbit,rtt=150ms,loss=1e-4,queue=1ms"));  // shallow queue

TEST(EndpointOverSimulator, HandshakeTakesTwoRoundTripsOnACleanLink) {
  // Hello, Retry, Hello with cookie, Accept: the client is connected after 2 RTTs.
  Outcome o = RunOnce("rate=1gbit,rtt=58ms", 1, 1000);
  ASSERT_TRUE(o.connected);
  EXPECT_GE(o.connected_at, Time::Zero() + Duration::Milliseconds(116));
  EXPECT_LT(o.connected_at, Time::Zero() + Duration::Milliseconds(118));
  EXPECT_TRUE(o.received_intact);
}

TEST(EndpointOverSimulator, SameSeedSameRun) {
  const Outcome a = RunOnce("rate=1gbit,rtt=20ms,loss=0.05,dup=0.05,reorder=0.05", 7, 1 << 20);
  const Outcome b = RunOnce("rate=1gbit,rtt=20ms,loss=0.05,dup=0.05,reorder=0.05", 7, 1 << 20);
  EXPECT_TRUE(a.received_intact);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.connected_at, b.connected_at);
  const Outcome c = RunOnce("rate=1gbit,rtt=20ms,loss=0.05,dup=0.05,reorder=0.05", 8, 1 << 20);
  EXPECT_NE(a.trace, c.trace);
}

}  // namespace
}  // namespace longhaul::testing
