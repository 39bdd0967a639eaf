// Engines (EndpointOptions::engines, datapath::EngineGroup) over real sockets on
// 127.0.0.1: the steering program sends each datagram to the engine its connection id
// names, connections spread over engines on both sides, 64 handshakes through one port,
// a Hello flood costs no state on any engine, protected transfers arrive intact, the
// accept queue and the backlog span the engines, bad options are refused. Every wait is
// bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pattern.h"
#include "tests/support/test_config.h"
#include "transport/api/endpoint.h"
#include "transport/drivers/udp/engine_steering.h"
#include "transport/endpoint/handshake.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

constexpr Duration kWait = Duration::Seconds(20);

EndpointOptions Options(uint32_t engines) {
  EndpointOptions eo;
  eo.security = endpoint::SecurityConfig::Insecure();
  eo.engines = engines;
  return eo;
}

std::unique_ptr<Endpoint> Make(const EndpointOptions& eo) {
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
  EXPECT_TRUE(ep.ok()) << ep.status();
  return ep.ok() ? *std::move(ep) : nullptr;
}

ConnectOptions Client() {
  ConnectOptions o;
  o.config = testing::LoopbackTestConfig();
  o.timeout = Duration::Seconds(10);
  return o;
}

ListenOptions Listener(uint32_t backlog = 128) {
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  lo.backlog = backlog;
  return lo;
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

bool WaitFor(ConnectionHandle& h, Event::Type type, Event* out) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    Event e;
    if (!h.Wait(&e, Duration::Milliseconds(100))) {
      if (h.closed()) return false;
      continue;
    }
    if (e.type == type) {
      *out = std::move(e);
      return true;
    }
  }
  return false;
}

// A datagram waiting on `fd` within `ms` (its size, or -1).
ssize_t ReceiveWithin(int fd, int ms, std::vector<uint8_t>* buf) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return -1;
  buf->resize(65536);
  return recv(fd, buf->data(), buf->size(), 0);
}

// ---- the steering program on a bare SO_REUSEPORT group ----

TEST(EngineSteering, DatagramsReachTheSocketTheirConnectionIdNames) {
  constexpr int kSockets = 3;
  std::array<int, kSockets> fds{};
  uint16_t port = 0;
  for (int i = 0; i < kSockets; ++i) {
    fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fds[i], 0);
    const int one = 1;
    ASSERT_EQ(setsockopt(fds[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
    sockaddr_in a = Loopback(port);
    ASSERT_EQ(bind(fds[i], reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
    if (port == 0) {
      socklen_t len = sizeof(a);
      ASSERT_EQ(getsockname(fds[i], reinterpret_cast<sockaddr*>(&a), &len), 0);
      port = ntohs(a.sin_port);
    }
  }
  ASSERT_TRUE(udp::AttachEngineSteering(fds[kSockets - 1], kSockets).ok());
  const int tx = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(tx, 0);
  const sockaddr_in to = Loopback(port);
  // Sends `d` and returns the index of the one socket that received it (-1: none, -2:
  // more than one).
  auto deliver = [&](const std::vector<uint8_t>& d) {
    EXPECT_EQ(sendto(tx, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(d.size()));
    int got = -1;
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN, 0});
    if (poll(p.data(), p.size(), 5000) <= 0) return -1;
    for (int i = 0; i < kSockets; ++i) {
      std::vector<uint8_t> buf(2048);
      if (recv(fds[i], buf.data(), buf.size(), 0) >= 0) got = got == -1 ? i : -2;
    }
    return got;
  };
  auto packet = [](uint8_t type, uint8_t id_top) {
    std::vector<uint8_t> d(64, 0);
    d[0] = wire::kVersion;
    d[1] = type;
    d[4] = id_top;
    d[11] = 0x5A;
    return d;
  };
  for (int engine = 0; engine < kSockets; ++engine) {
    const uint8_t e = static_cast<uint8_t>(engine);
    EXPECT_EQ(deliver(packet(static_cast<uint8_t>(wire::PacketType::kOneRtt), e)), engine);
    EXPECT_EQ(deliver(packet(static_cast<uint8_t>(wire::PacketType::kHandshake), e)), engine);
    // Sealed with either key phase (bit 7 of the type byte).
    EXPECT_EQ(deliver(packet(static_cast<uint8_t>(wire::PacketType::kSealed), e)), engine);
    EXPECT_EQ(deliver(packet(static_cast<uint8_t>(wire::PacketType::kSealed) | wire::kKeyPhaseBit, e)),
              engine);
  }
  // Not longhaul (the prober's 0xB7, a one-byte datagram): engine 0.
  EXPECT_EQ(deliver({0xB7, 1, 2, 3, 4, 5, 6, 7, 8}), 0);
  EXPECT_EQ(deliver({0x00}), 0);
  EXPECT_EQ(deliver({wire::kVersion, 0}), 0);  // truncated before the id: engine 0
  // Hellos (Initial) go to engine (top 16 bits of the body's client_cid) % engines, whatever
  // the header says, with or without a cookie (the body grows: a longer varint length).
  for (int top = 0; top < 8; ++top) {
    endpoint::HandshakeMessage hello{.kind = endpoint::HandshakeKind::kHello,
                                     .client_cid = (uint64_t(top) << 48) | 0x1234,
                                     .params = {8192, 8270, 1 << 20, 1024, 1, 1000}};
    absl::StatusOr<std::vector<uint8_t>> pkt = endpoint::BuildHandshakePacket(hello);
    ASSERT_TRUE(pkt.ok());
    EXPECT_EQ(deliver(*pkt), top % kSockets) << "client_cid top 16 bits " << top;
    hello.cookie.assign(17, 0xEE);
    hello.app_data.assign(300, 'a');
    pkt = endpoint::BuildHandshakePacket(hello);
    ASSERT_TRUE(pkt.ok());
    EXPECT_EQ(deliver(*pkt), top % kSockets) << "with a cookie, top 16 bits " << top;
  }
  // A Hello cut short before its client_cid: engine 0.
  EXPECT_EQ(deliver(packet(static_cast<uint8_t>(wire::PacketType::kInitial), 2)), 0);
  // An id naming no engine falls back to the hash: delivered to exactly one socket.
  EXPECT_GE(deliver(packet(static_cast<uint8_t>(wire::PacketType::kOneRtt), 200)), 0);
  close(tx);
  for (int fd : fds) close(fd);
}

// ---- whole endpoints ----

struct Transfer {
  std::shared_ptr<ConnectionHandle> client;
  std::shared_ptr<ConnectionHandle> server;
};

// Connects `n` connections from `client` to `server` (port) and moves one message of
// `bytes` on each, checking it arrives intact. Returns the pairs.
std::vector<Transfer> ConnectAndMove(Endpoint& client, Endpoint& server, uint16_t port, int n,
                                     size_t bytes) {
  std::vector<Transfer> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = client.Connect("127.0.0.1", port, Client());
    EXPECT_TRUE(c.ok()) << "connection " << i << ": " << c.status();
    if (!c.ok()) return out;
    out.push_back({*c, nullptr});
  }
  std::map<uint64_t, std::shared_ptr<ConnectionHandle>> by_peer;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = server.Accept(kWait);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return out;
    by_peer[(*s)->info().peer_id] = *s;
  }
  for (Transfer& t : out) {
    t.server = by_peer[t.client->info().local_id];
    EXPECT_NE(t.server, nullptr);
  }
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < n; ++i) msgs.push_back(testing::Pattern(bytes, static_cast<uint8_t>(i)));
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(out[i].client->Send(testing::HeldSend(msgs[i]), 1).ok());
  }
  for (int i = 0; i < n; ++i) {
    if (out[i].server == nullptr) continue;
    Event e;
    EXPECT_TRUE(WaitFor(*out[i].server, Event::Type::kReceiveComplete, &e)) << "connection " << i;
    EXPECT_TRUE(e.status.ok()) << e.status;
    EXPECT_EQ(e.size, bytes);
    if (e.size == bytes) {
      EXPECT_EQ(std::memcmp(e.data, msgs[i].data(), bytes), 0) << "connection " << i;
    }
  }
  return out;
}

class EnginesTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(EnginesTest, EveryConnectionsDatagramsReachItsEngine) {
  const uint32_t engines = GetParam();
  std::unique_ptr<Endpoint> server = Make(Options(engines));
  std::unique_ptr<Endpoint> client = Make(Options(engines));
  ASSERT_NE(server, nullptr);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok()) << port.status();
  const int n = static_cast<int>(4 * engines);
  std::vector<Transfer> t = ConnectAndMove(*client, *server, *port, n, 1 << 20);
  ASSERT_EQ(t.size(), static_cast<size_t>(n));
  std::vector<int> server_conns(engines, 0), client_conns(engines, 0);
  for (int i = 0; i < n; ++i) {
    // The client places connections on its engines in turn, and counts them in its ids'
    // top 16 bits, which the server's steering reads from the Hello: the server engine
    // is that count modulo its engines (consecutive connections, consecutive engines).
    EXPECT_EQ(t[i].client->info().engine, static_cast<uint32_t>(i) % engines);
    ASSERT_NE(t[i].server, nullptr);
    const uint64_t count = t[i].client->info().local_id >> 48;
    EXPECT_EQ(t[i].server->info().engine, count % engines);
    if (i > 0 && count != 0) {  // (a wrap of the 16-bit count may repeat one engine)
      EXPECT_EQ(count, (t[i - 1].client->info().local_id >> 48) + 1);
    }
    EXPECT_EQ(t[i].server->info().local_id >> 56, t[i].server->info().engine);
    ASSERT_LT(t[i].server->info().engine, engines);
    ++server_conns[t[i].server->info().engine];
    ++client_conns[t[i].client->info().engine];
  }
  const std::vector<EndpointStats> per = server->engine_stats();
  ASSERT_EQ(per.size(), engines);
  uint64_t accepted = 0;
  for (uint32_t e = 0; e < engines; ++e) {
    SCOPED_TRACE(::testing::Message() << "server engine " << e);
    // Nothing reached an engine that does not hold its connection.
    EXPECT_EQ(per[e].unknown_connection, 0u);
    EXPECT_EQ(per[e].undecodable, 0u);
    EXPECT_EQ(per[e].engines, engines);
    // 4 x engines connections spread evenly (one off where the count wrapped, 1 in 5000).
    EXPECT_GE(server_conns[e], 3);
    EXPECT_LE(server_conns[e], 5);
    EXPECT_EQ(per[e].connections_accepted, static_cast<uint64_t>(server_conns[e]));
    EXPECT_EQ(per[e].connections_active, static_cast<uint64_t>(server_conns[e]));
    // An engine with connections received at least their 1 MiB each.
    if (server_conns[e] > 0) {
      EXPECT_GE(per[e].bytes_received, static_cast<uint64_t>(server_conns[e]) << 20);
      EXPECT_GT(per[e].cpu_s, 0.0);
    }
    accepted += per[e].connections_accepted;
  }
  EXPECT_EQ(accepted, static_cast<uint64_t>(n));
  const std::vector<EndpointStats> cper = client->engine_stats();
  for (uint32_t e = 0; e < engines; ++e) {
    EXPECT_EQ(cper[e].unknown_connection, 0u) << "client engine " << e;
    EXPECT_EQ(client_conns[e], 4) << "client engine " << e;
    EXPECT_GE(cper[e].bytes_sent, uint64_t{4} << 20) << "client engine " << e;
  }
  const EndpointStats sum = server->stats();
  EXPECT_EQ(sum.engines, engines);
  EXPECT_EQ(sum.connections_accepted, static_cast<uint64_t>(n));
  uint64_t received = 0;
  for (const EndpointStats& s : per) received += s.datagrams_received;
  EXPECT_GE(sum.datagrams_received, received);  // refreshed after the per-engine read
}

INSTANTIATE_TEST_SUITE_P(Engines, EnginesTest, ::testing::Values(2u, 3u, 4u));

TEST(Engines, SixtyFourHandshakesThroughOnePortSpreadOverTheEngines) {
  constexpr uint32_t kEngines = 4;
  std::unique_ptr<Endpoint> server = Make(Options(kEngines));
  std::unique_ptr<Endpoint> client = Make(Options(2));
  ASSERT_NE(server, nullptr);
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<Transfer> t = ConnectAndMove(*client, *server, *port, 64, 4096);
  ASSERT_EQ(t.size(), 64u);
  const std::vector<EndpointStats> per = server->engine_stats();
  uint64_t accepted = 0;
  for (uint32_t e = 0; e < kEngines; ++e) {
    // One client's 64 consecutive connections: 16 on each engine.
    EXPECT_EQ(per[e].connections_accepted, 16u) << "engine " << e;
    EXPECT_EQ(per[e].unknown_connection, 0u) << "engine " << e;
    accepted += per[e].connections_accepted;
  }
  EXPECT_EQ(accepted, 64u);
}

// ConnectOptions::engine pins a connection to an engine on both sides (engine % engines):
// a reconnecting client keeps each connection's place.
TEST(Engines, AConnectionCanNameItsEngine) {
  std::unique_ptr<Endpoint> server = Make(Options(3));
  std::unique_ptr<Endpoint> client = Make(Options(2));
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok());
  for (int engine : {1, 1, 4, 2, 0}) {
    ConnectOptions co = Client();
    co.engine = engine;
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = client->Connect("127.0.0.1", *port, co);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = server->Accept(kWait);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*c)->info().engine, static_cast<uint32_t>(engine % 2)) << engine;
    EXPECT_EQ((*s)->info().engine, static_cast<uint32_t>(engine % 3)) << engine;
  }
  ConnectOptions bad = Client();
  bad.engine = 256;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = client->Connect("127.0.0.1", *port, bad);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("engine=256"), std::string::npos) << c.status();
}

// max_connections bounds the endpoint, not each engine: two engines with a limit of 4
// hold 2 each, so a client's fifth connection (its Hellos spread in turn) is refused busy.
TEST(Engines, TheConnectionLimitIsTheEndpoints) {
  EndpointOptions so = Options(2);
  so.max_connections = 4;
  std::unique_ptr<Endpoint> server = Make(so);
  std::unique_ptr<Endpoint> client = Make(Options(1));
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok());
  std::vector<std::shared_ptr<ConnectionHandle>> held;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = client->Connect("127.0.0.1", *port, Client());
    ASSERT_TRUE(c.ok()) << i << ": " << c.status();
    held.push_back(*c);
  }
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> fifth =
      client->Connect("127.0.0.1", *port, Client());
  ASSERT_FALSE(fifth.ok());
  EXPECT_NE(fifth.status().message().find("busy"), std::string::npos) << fifth.status();
  uint64_t active = 0;
  for (const EndpointStats& s : server->engine_stats()) {
    EXPECT_LE(s.connections_active, 2u);
    active += s.connections_active;
  }
  EXPECT_EQ(active, 4u);
}

TEST(Engines, ProtectedTransfersArriveIntact) {
  EndpointOptions eo;
  crypto::Key32 psk{};
  for (size_t i = 0; i < psk.size(); ++i) psk[i] = static_cast<uint8_t>(i * 7 + 1);
  eo.security.psk = psk;
  eo.engines = 2;
  std::unique_ptr<Endpoint> server = Make(eo);
  std::unique_ptr<Endpoint> client = Make(eo);
  ASSERT_NE(server, nullptr);
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok());
  std::vector<Transfer> t = ConnectAndMove(*client, *server, *port, 4, 3 << 20);
  ASSERT_EQ(t.size(), 4u);
  for (const Transfer& x : t) EXPECT_FALSE(x.server->info().cipher.empty());
  uint64_t unauthenticated = 0;
  for (const EndpointStats& s : server->engine_stats()) {
    unauthenticated += s.packets_unauthenticated;
    EXPECT_EQ(s.unknown_connection, 0u);
  }
  EXPECT_EQ(unauthenticated, 0u);
}

TEST(Engines, HelloFloodFromSpoofedSourcesKeepsNoStateOnAnyEngine) {
  constexpr uint32_t kEngines = 3;
  std::unique_ptr<Endpoint> server = Make(Options(kEngines));
  ASSERT_NE(server, nullptr);
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok());
  // Hellos without cookies from 48 source ports and client ids (a spoofer never sees the
  // Retry): each gets a Retry from the engine its id picks and leaves nothing behind.
  constexpr int kSources = 48;
  const sockaddr_in to = Loopback(*port);
  int retries = 0;
  for (int i = 0; i < kSources; ++i) {
    const endpoint::HandshakeMessage hello{.kind = endpoint::HandshakeKind::kHello,
                                           .client_cid = (uint64_t(i * 37) << 48) | 99,
                                           .params = {8192, 8270, 1 << 20, 1024, 1, 1000}};
    absl::StatusOr<std::vector<uint8_t>> pkt = endpoint::BuildHandshakePacket(hello);
    ASSERT_TRUE(pkt.ok());
    const int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(sendto(fd, pkt->data(), pkt->size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(pkt->size()));
    std::vector<uint8_t> reply;
    const ssize_t n = ReceiveWithin(fd, 5000, &reply);
    if (n > 0) {
      reply.resize(static_cast<size_t>(n));
      absl::StatusOr<endpoint::HandshakeMessage> r = endpoint::ParseHandshakePacket(reply);
      if (r.ok() && r->kind == endpoint::HandshakeKind::kRetry) ++retries;
      EXPECT_LE(reply.size(), 3 * pkt->size());
    }
    close(fd);
  }
  EXPECT_EQ(retries, kSources);
  uint64_t hellos = 0;
  int engines_reached = 0;
  for (const EndpointStats& s : server->engine_stats()) {
    EXPECT_EQ(s.connections_active, 0u);
    EXPECT_EQ(s.connections_accepted, 0u);
    hellos += s.hellos_received;
    engines_reached += s.hellos_received > 0;
  }
  EXPECT_EQ(hellos, static_cast<uint64_t>(kSources));
  EXPECT_EQ(engines_reached, 3);  // the ids' top 16 bits name all three
  // The server still serves a real client afterwards.
  std::unique_ptr<Endpoint> client = Make(Options(1));
  EXPECT_EQ(ConnectAndMove(*client, *server, *port, 2, 1000).size(), 2u);
}

TEST(Engines, AcceptCallbacksRunOnEveryEngineAndTheBacklogSpansThem) {
  // With a callback: every accepted connection reaches it, from the engines' threads.
  std::mutex mu;
  std::map<uint32_t, int> per_engine;
  ListenOptions lo = Listener();
  lo.on_accept = [&](std::shared_ptr<ConnectionHandle> h) {
    std::lock_guard<std::mutex> l(mu);
    ++per_engine[h->info().engine];
  };
  std::unique_ptr<Endpoint> server = Make(Options(2));
  std::unique_ptr<Endpoint> client = Make(Options(2));
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, std::move(lo));
  ASSERT_TRUE(port.ok());
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(client->Connect("127.0.0.1", *port, Client()).ok()) << i;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int total = 0;
  while (std::chrono::steady_clock::now() < end) {
    {
      std::lock_guard<std::mutex> l(mu);
      total = 0;
      for (auto& [e, n] : per_engine) total += n;
    }
    if (total == 16) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(total, 16);
  // Without one: a backlog of 3 for the whole endpoint, whichever engines accept. The
  // backlog counts connections in the queue, which a connection joins when its client's
  // confirmation reaches its engine: wait for that (the server's accepted count) before
  // the next Hello, which another engine may handle first.
  std::unique_ptr<Endpoint> queued = Make(Options(3));
  absl::StatusOr<uint16_t> qport = queued->Listen("127.0.0.1", 0, Listener(3));
  ASSERT_TRUE(qport.ok());
  int ok = 0, busy = 0;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
        client->Connect("127.0.0.1", *qport, Client());
    if (c.ok()) {
      ++ok;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (queued->stats().connections_accepted < static_cast<uint64_t>(ok) &&
             std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      ASSERT_EQ(queued->stats().connections_accepted, static_cast<uint64_t>(ok));
    } else {
      EXPECT_NE(c.status().message().find("busy"), std::string::npos) << c.status();
      ++busy;
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(busy, 5);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(queued->Accept(kWait).ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(queued->Accept(Duration::Milliseconds(50)).status()));
  queued->Close();
  EXPECT_TRUE(absl::IsCancelled(queued->Accept(Duration::Seconds(1)).status()));
}

TEST(Engines, BadEngineOptionsAreRefusedByName) {
  EndpointOptions too_many = Options(kMaxEngines + 1);
  absl::StatusOr<std::unique_ptr<Endpoint>> a = Endpoint::Create(too_many);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(a.status()));
  EXPECT_NE(a.status().message().find("engines="), std::string::npos) << a.status();
  EndpointOptions negative = Options(2);
  negative.engine_cpus = {0, -3};
  absl::StatusOr<std::unique_ptr<Endpoint>> b = Endpoint::Create(negative);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("engine_cpus"), std::string::npos) << b.status();
  EndpointOptions verbs = Options(2);
  verbs.datapath = Datapath::kVerbs;
  absl::StatusOr<std::unique_ptr<Endpoint>> c = Endpoint::Create(verbs);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("datapath udp"), std::string::npos) << c.status();
  // Auto: at least one engine, at most kMaxAutoEngines.
  std::unique_ptr<Endpoint> automatic = Make(Options(0));
  ASSERT_NE(automatic, nullptr);
  const EndpointStats s = automatic->stats();
  EXPECT_GE(s.engines, 1u);
  EXPECT_LE(s.engines, kMaxAutoEngines);
}

TEST(Engines, PinnedEnginesRunAndReportTheirCpu) {
  EndpointOptions eo = Options(2);
  eo.engine_cpus = {0};
  std::unique_ptr<Endpoint> server = Make(eo);
  std::unique_ptr<Endpoint> client = Make(Options(1));
  absl::StatusOr<uint16_t> port = server->Listen("127.0.0.1", 0, Listener());
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(ConnectAndMove(*client, *server, *port, 2, 1 << 20).size(), 2u);
  double cpu = 0;
  for (const EndpointStats& s : server->engine_stats()) cpu += s.cpu_s;
  EXPECT_GT(cpu, 0.0);
  EXPECT_GE(server->stats().cpu_s, cpu);  // the sum, refreshed (CPU only grows)
  // The engine threads carry their names; engine 0 of the server is pinned to CPU 0
  // (engine_cpus repeats: engine 1 too). Unpinned threads keep the process's CPUs.
  int pinned = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("lh-engine-", 0) != 0) continue;
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0 && line.substr(line.find(':') + 1) == "\t0") {
        ++pinned;
      }
    }
  }
  EXPECT_EQ(pinned, 2);  // the server's two engines (the client's one is not pinned)
}

}  // namespace
}  // namespace longhaul
