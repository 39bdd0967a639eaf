// PeerPath (a client flow's address on the server: moves, the 3x limit while a new address
// is unvalidated, probes, proof by acknowledgement) and the endpoint around it: a client
// packet replayed from a spoofed address ahead of the original (the race an on-path
// attacker can win) moves the flow there, but the server sends it at most 3x the copy's
// size plus a probe, and moves back when the client's next packet arrives; the transfer
// completes intact.
#include "transport/endpoint/peer_path.h"

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_config.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/testing/endpoint_net.h"

namespace longhaul::endpoint {
namespace {

using ::longhaul::testing::EndpointNet;
using ::longhaul::testing::NetDatagram;
using ::longhaul::testing::NetVerdict;

PeerAddress Addr(uint8_t b) { return PeerAddress(std::vector<uint8_t>{b, 1, 2, 3}); }

Time At(int64_t ms) { return Time::Zero() + Duration::Milliseconds(ms); }

TEST(PeerPath, SameAddressChangesNothing) {
  PeerPath p(Addr(1));
  EXPECT_TRUE(p.validated());
  EXPECT_EQ(p.OnPacket(Addr(1), 1000, {}), PeerPath::Change::kNone);
  EXPECT_TRUE(p.CanSend(At(0), 1 << 20));
  EXPECT_EQ(p.next_probe(), Time::Infinite());
}

TEST(PeerPath, NewAddressGetsThreeTimesWhatItSentPlusAProbe) {
  PeerPath p(Addr(1));
  EXPECT_EQ(p.OnPacket(Addr(2), 100, {}), PeerPath::Change::kMoved);
  EXPECT_EQ(p.address(), Addr(2));
  EXPECT_FALSE(p.validated());
  EXPECT_EQ(p.candidate_received(), 100u);
  EXPECT_TRUE(p.CanSend(At(0), 300));  // within 3x
  p.OnSent(At(0), 300, 50);
  EXPECT_EQ(p.probes(), 0u);
  // The budget is spent; the first probe is due at once.
  EXPECT_TRUE(p.CanSend(At(0), 1));
  p.OnSent(At(0), 9000, 51);
  EXPECT_EQ(p.probes(), 1u);
  EXPECT_FALSE(p.CanSend(At(199), 1));
  EXPECT_EQ(p.next_probe(), At(200));
  EXPECT_TRUE(p.CanSend(At(200), 9000));
  // More bytes from the address raise the budget.
  EXPECT_EQ(p.OnPacket(Addr(2), 4000, {}), PeerPath::Change::kNone);
  EXPECT_TRUE(p.CanSend(At(1), 12300 - 9300));
  EXPECT_FALSE(p.CanSend(At(1), 12300 - 9300 + 1));
}

TEST(PeerPath, AnAckOfAPacketSentThereValidates) {
  PeerPath p(Addr(1));
  p.OnPacket(Addr(2), 100, {});
  p.OnSent(At(0), 300, 70);
  p.OnSent(At(0), 9000, 72);
  // Acks of other packets (sent before the move, to the old address) prove nothing.
  const std::vector<wire::AckRange> old = {{60, 69}, {71, 71}};
  EXPECT_EQ(p.OnPacket(Addr(2), 60, old), PeerPath::Change::kNone);
  EXPECT_FALSE(p.validated());
  // Nor does an ack from another address.
  const std::vector<wire::AckRange> good = {{72, 72}};
  EXPECT_EQ(p.OnPacket(Addr(3), 60, good), PeerPath::Change::kMoved);  // a new candidate
  EXPECT_EQ(p.candidate_received(), 60u);
  EXPECT_FALSE(p.validated());
  // Addr(3) got nothing yet; back to Addr(2) is a fresh candidate, proven by its ack only
  // once a packet went there again.
  EXPECT_EQ(p.OnPacket(Addr(2), 60, good), PeerPath::Change::kMoved);
  p.OnSent(At(1), 100, 80);
  EXPECT_EQ(p.OnPacket(Addr(2), 60, std::vector<wire::AckRange>{{75, 85}}),
            PeerPath::Change::kValidated);
  EXPECT_TRUE(p.validated());
  EXPECT_EQ(p.address(), Addr(2));
  EXPECT_TRUE(p.CanSend(At(1), 1 << 20));
  // The old address is now just another address.
  EXPECT_EQ(p.OnPacket(Addr(1), 60, {}), PeerPath::Change::kMoved);
}

TEST(PeerPath, TheValidatedAddressComesBackAtOnceAndTheCandidateKeepsItsState) {
  PeerPath p(Addr(1));
  p.OnPacket(Addr(2), 100, {});
  p.OnSent(At(0), 250, 10);
  EXPECT_EQ(p.OnPacket(Addr(1), 50, {}), PeerPath::Change::kReturned);
  EXPECT_TRUE(p.validated());
  EXPECT_TRUE(p.CanSend(At(0), 1 << 20));
  // Reordering across a rebinding: the candidate resumes with its budget and its packets.
  EXPECT_EQ(p.OnPacket(Addr(2), 100, {}), PeerPath::Change::kMoved);
  EXPECT_EQ(p.candidate_received(), 200u);
  EXPECT_EQ(p.candidate_sent(), 250u);
  EXPECT_EQ(p.OnPacket(Addr(2), 50, std::vector<wire::AckRange>{{10, 10}}),
            PeerPath::Change::kValidated);
}

TEST(PeerPath, OnlyTheMostRecentPacketNumbersAreRemembered) {
  PeerPath p(Addr(1));
  p.OnPacket(Addr(2), 1 << 20, {});
  for (PacketNumber pn = 0; pn < 100; ++pn) p.OnSent(At(0), 100, pn);
  EXPECT_EQ(p.OnPacket(Addr(2), 10, std::vector<wire::AckRange>{{0, 100 - PeerPath::kTrackedPackets - 1}}),
            PeerPath::Change::kNone);
  EXPECT_EQ(p.OnPacket(Addr(2), 10, std::vector<wire::AckRange>{{99, 99}}),
            PeerPath::Change::kValidated);
}

// ---- the endpoint: a replay race from a spoofed address ----

constexpr LocalId kListen = 1;
constexpr LocalId kClient = 10;

EndpointConfig Config(uint64_t seed) { return ::longhaul::testing::InsecureEndpointConfig(seed); }

TEST(EndpointPath, SpoofedReplayIsHeldToThreeTimesAndTheClientMovesItBack) {
  EndpointNet net(Duration::Milliseconds(10));
  const int server = net.Add(Config(1));
  const int client = net.Add(Config(2));
  ListenConfig lc;
  lc.config.initial_rtt = Duration::Milliseconds(20);
  lc.config.rate = Bandwidth::Mbps(200);
  ASSERT_TRUE(net.node(server).Listen(kListen, lc).ok());
  ConnectConfig cc;
  cc.config.initial_rtt = Duration::Milliseconds(20);
  cc.config.rate = Bandwidth::Mbps(200);
  ASSERT_TRUE(net.node(client)
                  .Connect(net.now(), EndpointNet::AddressOf(server, kListen), {kClient}, cc)
                  .ok());
  std::optional<ConnectionId> server_id;
  ASSERT_TRUE(net.RunUntil(
      [&] {
        for (const EndpointEvent& e : net.events(server)) {
          if (e.type == EndpointEvent::Type::kIncoming) server_id = e.id;
        }
        return server_id.has_value();
      },
      Duration::Seconds(5)));
  // The server sends 4 MiB (a reverse transfer: the client only acknowledges).
  const size_t size = 4 << 20;
  std::vector<uint8_t> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  ASSERT_TRUE(net.node(server).ConnectionAt(*server_id)->Send(SendBuffer{data.data(), size}, 1).ok());
  net.node(server).Touch(*server_id);
  // The attacker's copy of one of the client's ACKs arrives first, from a spoofed source
  // that belongs to nobody (the victim); the original and the client's packets of the
  // next 50 ms are lost, so without the limit the server would send the victim a whole
  // window (about 200 Mbit/s x 20 ms = 500 KB).
  const PeerAddress victim = EndpointNet::AddressOf(7, 1);
  std::optional<std::vector<uint8_t>> captured;
  Time captured_at = Time::Infinite();
  uint64_t to_victim = 0, datagrams_to_victim = 0;
  size_t largest_to_victim = 0;
  net.set_filter([&](const NetDatagram& d) {
    NetVerdict v;
    if (d.to == victim) {
      to_victim += d.bytes.size();
      ++datagrams_to_victim;
      largest_to_victim = std::max(largest_to_victim, d.bytes.size());
    }
    if (d.from_node == client && !captured && d.index > 40) {
      captured = d.bytes;
      captured_at = net.now();
    }
    if (d.from_node == client && net.now() < captured_at + Duration::Milliseconds(50)) {
      v.drop = true;
    }
    return v;
  });
  ASSERT_TRUE(net.RunUntil([&] { return captured.has_value(); }, Duration::Seconds(5)));
  net.Inject(server, kListen, victim, *captured);
  const EndpointCounters& k = net.node(server).counters();
  EXPECT_EQ(k.path_changes, 1u);
  // The transfer completes intact over the client's real address.
  bool done = false;
  ASSERT_TRUE(net.RunUntil(
      [&] {
        for (auto& e : net.connection_events(client)) {
          if (e.event.type == Event::Type::kReceiveComplete) {
            EXPECT_TRUE(e.event.status.ok());
            EXPECT_EQ(e.event.size, size);
            EXPECT_EQ(std::memcmp(e.event.data, data.data(), size), 0);
            done = true;
          }
        }
        return done;
      },
      Duration::Seconds(30)));
  EXPECT_GE(k.path_returns, 1u);
  EXPECT_EQ(k.paths_validated, 0u);
  // The victim got at most 3x the copy plus the probes: one datagram per 200 ms while the
  // client was silent (until its keepalive, 5 s, moved the flow back).
  EXPECT_GT(datagrams_to_victim, 0u);
  EXPECT_GE(k.path_probes, 1u);
  EXPECT_LE(k.path_probes, 5000 / 200 + 1);
  EXPECT_LE(to_victim, 3 * captured->size() + k.path_probes * largest_to_victim)
      << datagrams_to_victim << " datagrams, " << k.path_probes << " probes";
}

}  // namespace
}  // namespace longhaul::endpoint
