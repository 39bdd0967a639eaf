// Endpoint and UDP driver over real sockets on 127.0.0.1 (ports chosen by the kernel):
// handshake, transfers with polling, callbacks and posted buffers, multi-flow, errors
// (closed port, silent port, version mismatch, policy reject), forged cookies, a vanished
// peer and shutdown. Every wait is bounded.
#include "transport/api/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/pattern.h"
#include "tests/support/test_config.h"
#include "tests/support/udp_ports.h"
#include "transport/base/clock.h"
#include "transport/endpoint/handshake.h"
#include "transport/testing/loopback_relay.h"

namespace longhaul {
namespace {

constexpr Duration kWait = Duration::Seconds(20);

using testing::Pattern;

struct Server {
  std::unique_ptr<Endpoint> ep;
  uint16_t port = 0;
};

// Plaintext endpoints: these tests are about the driver and the API, not protection
// (tests/unit/endpoint and tests/e2e cover protected connections).
EndpointOptions Insecure() {
  EndpointOptions eo;
  eo.security = endpoint::SecurityConfig::Insecure();
  return eo;
}

Server StartServer(ListenOptions lo = {}, EndpointOptions eo = Insecure()) {
  Server s;
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
  EXPECT_TRUE(ep.ok()) << ep.status();
  s.ep = *std::move(ep);
  if (lo.config.rate == TransportConfig().rate) lo.config = testing::LoopbackTestConfig();
  absl::StatusOr<uint16_t> port = s.ep->Listen("127.0.0.1", 0, std::move(lo));
  EXPECT_TRUE(port.ok()) << port.status();
  s.port = port.ok() ? *port : 0;
  return s;
}

// A plain UDP socket connected to 127.0.0.1:port (-1 on failure), for raw datagrams.
int RawSocketTo(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::unique_ptr<Endpoint> NewEndpoint() {
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(Insecure());
  EXPECT_TRUE(ep.ok());
  return *std::move(ep);
}

ConnectOptions Client(TransportConfig c = testing::LoopbackTestConfig()) {
  ConnectOptions o;
  o.config = c;
  o.timeout = Duration::Seconds(5);
  return o;
}

// Waits for the next event of `type`, skipping others; false on timeout.
bool WaitFor(ConnectionHandle& h, Event::Type type, Event* out, Duration timeout = kWait) {
  auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout.ns());
  while (std::chrono::steady_clock::now() < end) {
    Event e;
    if (!h.Wait(&e, Duration::Milliseconds(100))) {
      if (h.closed() && type != Event::Type::kClosed) return false;
      continue;
    }
    if (e.type == type) {
      *out = std::move(e);
      return true;
    }
  }
  return false;
}

TEST(Endpoint, ConnectSendReceivePollingAndCleanClose) {
  Server srv = StartServer();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", srv.port, Client());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->info().is_server);
  EXPECT_EQ((*s)->info().peer_id, (*c)->info().local_id);
  EXPECT_EQ((*c)->info().peer_id, (*s)->info().local_id);

  const std::vector<size_t> sizes = {0, 1, 1000, 8192, 100000, 3 << 20};
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t i = 0; i < sizes.size(); ++i) msgs.push_back(Pattern(sizes[i], uint8_t(i)));
  for (size_t i = 0; i < msgs.size(); ++i) {
    absl::StatusOr<uint64_t> id = (*c)->Send(testing::HeldSend(msgs[i]), 100 + i);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, i);
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    Event e;
    ASSERT_TRUE(WaitFor(**s, Event::Type::kReceiveComplete, &e)) << "message " << i;
    ASSERT_TRUE(e.status.ok()) << e.status;
    EXPECT_EQ(e.message_id, i);
    ASSERT_EQ(e.size, sizes[i]);
    if (e.size > 0) {
      EXPECT_EQ(std::memcmp(e.data, msgs[i].data(), e.size), 0);
    }
    (*s)->ReturnBuffer(std::move(e.owned));
  }
  for (size_t i = 0; i < msgs.size(); ++i) {
    Event e;
    ASSERT_TRUE(WaitFor(**c, Event::Type::kSendComplete, &e));
    EXPECT_TRUE(e.status.ok()) << e.status;
    EXPECT_EQ(e.tag, 100 + i);
  }
  (*c)->Close();
  Event closed;
  ASSERT_TRUE(WaitFor(**s, Event::Type::kClosed, &closed));
  EXPECT_TRUE(closed.status.ok()) << closed.status;
  ASSERT_TRUE((*c)->WaitClosed(kWait));
  EXPECT_TRUE((*c)->status().ok());
  EXPECT_FALSE((*c)->Send(SendBuffer{msgs[1].data(), 1}, 0).ok());
  EndpointStats st = srv.ep->stats();
  EXPECT_EQ(st.connections_accepted, 1u);
  EXPECT_GE(st.retries_sent, 1u);  // the stateless cookie round trip happened
}

// Zero copy's registration on a datapath that copies (UDP): ids are distinct and never
// 0, bad memory is refused by name, and a message naming its region arrives intact.
TEST(Endpoint, RegisteredMemoryOverUdpIsCopiedAsAnyMessage) {
  Server srv = StartServer();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  const std::vector<uint8_t> msg = Pattern(200000, 7);
  absl::StatusOr<uint64_t> r1 = cep->RegisterMemory(msg.data(), msg.size());
  absl::StatusOr<uint64_t> r2 = cep->RegisterMemory(msg.data(), msg.size() / 2);
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_NE(*r1, 0u);
  EXPECT_NE(*r1, *r2);
  absl::StatusOr<uint64_t> bad = cep->RegisterMemory(nullptr, 10);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("null or empty"));
  EXPECT_EQ(cep->RegisterMemory(msg.data(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", srv.port, Client());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok()) << s.status();
  SendBuffer b{msg.data(), msg.size()};
  b.region = *r1;
  ASSERT_TRUE((*c)->Send(std::move(b), 5).ok());
  Event e;
  ASSERT_TRUE(WaitFor(**s, Event::Type::kReceiveComplete, &e));
  ASSERT_EQ(e.size, msg.size());
  EXPECT_EQ(std::memcmp(e.data, msg.data(), msg.size()), 0);
  ASSERT_TRUE(WaitFor(**c, Event::Type::kSendComplete, &e));
  EXPECT_TRUE(cep->DeregisterMemory(*r1).ok());
  EXPECT_TRUE(cep->DeregisterMemory(*r2).ok());
}

crypto::KeyPair TestPair(uint8_t v) {
  crypto::Key32 k;
  k.fill(v);
  return *crypto::KeyPairFromPrivate(k);
}

EndpointOptions Keyed(uint8_t own, uint8_t peer) {
  EndpointOptions eo;
  eo.security.key = TestPair(own);
  eo.security.peer_keys = {TestPair(peer).public_key};
  return eo;  // the driver supplies the system's entropy
}

// Static keys over real UDP sockets: the driver's default entropy, sealed datagrams,
// and the modes reported on both handles.
TEST(Endpoint, ProtectedConnectionOverUdp) {
  Server srv = StartServer({}, Keyed(2, 1));
  absl::StatusOr<std::unique_ptr<Endpoint>> cep = Endpoint::Create(Keyed(1, 2));
  ASSERT_TRUE(cep.ok()) << cep.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      (*cep)->Connect("127.0.0.1", srv.port, Client());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT((*c)->info().security, ::testing::HasSubstr("Noise IK"));
  EXPECT_EQ((*s)->info().peer_key, crypto::ToHex(TestPair(1).public_key));
  const std::vector<uint8_t> msg = Pattern(2 << 20, 3);
  ASSERT_TRUE((*c)->Send(testing::HeldSend(msg), 1).ok());
  Event e;
  ASSERT_TRUE(WaitFor(**s, Event::Type::kReceiveComplete, &e));
  ASSERT_TRUE(e.status.ok()) << e.status;
  ASSERT_EQ(e.size, msg.size());
  EXPECT_EQ(std::memcmp(e.data, msg.data(), msg.size()), 0);
  EndpointStats st = srv.ep->stats();
  EXPECT_EQ(st.packets_unauthenticated, 0u);
  EXPECT_EQ(st.plaintext_refused, 0u);
}

TEST(Endpoint, WrongKeysAndNoChoiceAreClearErrors) {
  EXPECT_THAT(std::string(Endpoint::Create(EndpointOptions{}).status().message()),
              ::testing::HasSubstr("no keys"));
  Server srv = StartServer({}, Keyed(2, 1));
  absl::StatusOr<std::unique_ptr<Endpoint>> cep = Endpoint::Create(Keyed(1, 9));
  ASSERT_TRUE(cep.ok());
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      (*cep)->Connect("127.0.0.1", srv.port, Client());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("refused the client's keys"));
  EXPECT_EQ(srv.ep->stats().handshake_auth_failures, 1u);
  EXPECT_EQ(srv.ep->stats().connections_active, 0u);
}

TEST(Endpoint, CallbacksAndPostedBuffersAndReverseDirection) {
  std::atomic<int> received{0};
  std::vector<uint8_t> posted(1 << 20);
  std::vector<uint8_t> expect = Pattern(1 << 20, 3);
  std::atomic<bool> content_ok{false};
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  lo.on_accept = [&](std::shared_ptr<ConnectionHandle> h) {
    ASSERT_TRUE(h->PostReceive(posted.data(), posted.size(), 77).ok());
    ConnectionHandle* raw = h.get();
    h->SetCallback([&, raw](Event& e) {
      if (e.type != Event::Type::kReceiveComplete) return;
      content_ok = e.tag == 77 && e.data == posted.data() &&
                   std::memcmp(e.data, expect.data(), expect.size()) == 0;
      // Answer from inside the callback (driver thread).
      static const char kReply[] = "thanks";
      ASSERT_TRUE(raw->Send(SendBuffer{reinterpret_cast<const uint8_t*>(kReply), 6}, 1).ok());
      received.fetch_add(1);
    });
  };
  Server srv = StartServer(std::move(lo));
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  std::atomic<int> replies{0};
  ConnectOptions co = Client();
  co.callback = [&](Event& e) {
    if (e.type == Event::Type::kReceiveComplete && e.size == 6 &&
        std::memcmp(e.data, "thanks", 6) == 0) {
      replies.fetch_add(1);
    }
  };
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", srv.port, std::move(co));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Send(SendBuffer{expect.data(), expect.size()}, 5).ok());
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (replies.load() == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(received.load(), 1);
  EXPECT_TRUE(content_ok.load());
  EXPECT_EQ(replies.load(), 1);
}

TEST(Endpoint, SeveralFlowsUseDistinctSourcePorts) {
  Server srv = StartServer();
  absl::StatusOr<std::unique_ptr<testing::LoopbackRelay>> relay =
      testing::LoopbackRelay::Start(srv.port);
  ASSERT_TRUE(relay.ok()) << relay.status();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  TransportConfig cfg = testing::LoopbackTestConfig();
  cfg.flows = 4;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", (*relay)->port(), Client(cfg));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().flows, 4u);
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->config().flows, 4u);
  std::vector<uint8_t> data = Pattern(4 << 20, 9);
  ASSERT_TRUE((*c)->Send(testing::HeldSend(data), 1).ok());
  Event e;
  ASSERT_TRUE(WaitFor(**s, Event::Type::kReceiveComplete, &e));
  ASSERT_EQ(e.size, data.size());
  EXPECT_EQ(std::memcmp(e.data, data.data(), data.size()), 0);
  absl::StatusOr<emu::EmuStats> st = (*relay)->Stop();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->clients_created, 4u);  // one per client source port
}

TEST(Endpoint, ConnectToAClosedPortFailsClearly) {
  const uint16_t port = testing::UnusedUdpPort();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = cep->Connect("127.0.0.1", port, Client());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("refused"), std::string::npos) << c.status();
}

TEST(Endpoint, SilentPortTimesOutWithinTheHandshakeTimeout) {
  testing::SilentUdpSocket silent;
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  ConnectOptions co = Client();
  co.timeout = Duration::Milliseconds(600);
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", silent.port(), co);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("no answer"), std::string::npos) << c.status();
}

TEST(Endpoint, UnresolvableHostIsNotFound) {
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("no-such-host.invalid", 5201, Client());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsNotFound(c.status())) << c.status();
}

TEST(Endpoint, VersionMismatchIsReportedToTheClient) {
  Server srv = StartServer();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  ConnectOptions co = Client();
  co.protocol_version = endpoint::kProtocolVersion + 1;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = cep->Connect("127.0.0.1", srv.port, co);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("version mismatch"), std::string::npos) << c.status();
  EXPECT_EQ(srv.ep->stats().version_mismatches, 1u);
}

TEST(Endpoint, PolicySeesAppDataAndCanReject) {
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  lo.policy = [](const HelloInfo& h) -> absl::StatusOr<TransportConfig> {
    if (h.app_data != "please") return absl::PermissionDeniedError("say please");
    TransportConfig c = testing::LoopbackTestConfig();
    c.rate = Bandwidth::Gbps(3);
    return c;
  };
  Server srv = StartServer(std::move(lo));
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  ConnectOptions rude = Client();
  rude.app_data = "now";
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = cep->Connect("127.0.0.1", srv.port, rude);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("say please"), std::string::npos) << c.status();
  ConnectOptions polite = Client();
  polite.app_data = "please";
  c = cep->Connect("127.0.0.1", srv.port, polite);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->config().rate, Bandwidth::Gbps(3));
  EXPECT_EQ((*s)->info().peer_app_data, "please");
}

// Raw datagrams against a server: garbage, a short Hello, a Hello without a cookie (a
// small Retry comes back), a Hello with a forged cookie (dropped, nothing comes back).
TEST(Endpoint, ServerIsStatelessBeforeValidationAndDropsForgedCookies) {
  // An accept callback counts what reaches the application: a Hello with a valid cookie
  // that is never confirmed (a replay looks the same) must not.
  std::atomic<int> accepted{0};
  ListenOptions lo;
  lo.on_accept = [&accepted](std::shared_ptr<ConnectionHandle>) { ++accepted; };
  EndpointOptions eo = Insecure();
  eo.cookie_lifetime = Duration::Seconds(1);
  Server srv = StartServer(std::move(lo), eo);
  const int fd = RawSocketTo(srv.port);
  ASSERT_GE(fd, 0);
  auto receive = [&](int ms) -> std::vector<uint8_t> {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return {};
    std::vector<uint8_t> buf(65536);
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return buf;
  };
  const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(send(fd, garbage, sizeof(garbage), 0), 0);
  const endpoint::HandshakeMessage hello{.kind = endpoint::HandshakeKind::kHello,
                                         .client_cid = 1234,
                                         .params = {8192, 8270, 1 << 20, 1024, 1, 1000}};
  absl::StatusOr<std::vector<uint8_t>> pkt = endpoint::BuildHandshakePacket(hello);
  ASSERT_TRUE(pkt.ok());
  // Short: a valid Hello cut to 1000 bytes (checksum then fails) and an unpadded one.
  std::vector<uint8_t> short_pkt(pkt->begin(), pkt->begin() + 1000);
  ASSERT_GT(send(fd, short_pkt.data(), short_pkt.size(), 0), 0);
  // Proper Hello without a cookie: a Retry, at most 3x the bytes sent.
  ASSERT_GT(send(fd, pkt->data(), pkt->size(), 0), 0);
  std::vector<uint8_t> reply = receive(5000);
  ASSERT_FALSE(reply.empty());
  EXPECT_LE(reply.size(), 3 * pkt->size());
  absl::StatusOr<endpoint::HandshakeMessage> retry = endpoint::ParseHandshakePacket(reply);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->kind, endpoint::HandshakeKind::kRetry);
  EXPECT_EQ(retry->client_cid, 1234u);
  // Forged cookie: flip one bit of the real one.
  endpoint::HandshakeMessage forged = hello;
  forged.cookie = retry->cookie;
  forged.cookie.back() ^= 1;
  absl::StatusOr<std::vector<uint8_t>> fpkt = endpoint::BuildHandshakePacket(forged);
  ASSERT_TRUE(fpkt.ok());
  ASSERT_GT(send(fd, fpkt->data(), fpkt->size(), 0), 0);
  // The server drops it: wait until it counted it, then check nothing came back.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (srv.ep->stats().cookies_invalid == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EndpointStats st = srv.ep->stats();
  EXPECT_EQ(st.cookies_invalid, 1u);
  EXPECT_EQ(st.connections_accepted, 0u);
  EXPECT_EQ(st.connections_active, 0u);
  EXPECT_GE(st.undecodable, 1u);
  EXPECT_TRUE(receive(200).empty());
  // The genuine cookie is accepted.
  endpoint::HandshakeMessage good = hello;
  good.cookie = retry->cookie;
  absl::StatusOr<std::vector<uint8_t>> gpkt = endpoint::BuildHandshakePacket(good);
  ASSERT_GT(send(fd, gpkt->data(), gpkt->size(), 0), 0);
  reply = receive(5000);
  absl::StatusOr<endpoint::HandshakeMessage> acc = endpoint::ParseHandshakePacket(reply);
  ASSERT_TRUE(acc.ok()) << acc.status();
  EXPECT_EQ(acc->kind, endpoint::HandshakeKind::kAccept);
  // Never confirmed: held by the endpoint until the confirm deadline, then dropped,
  // without reaching the accept callback.
  end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (srv.ep->stats().unconfirmed_expired == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  st = srv.ep->stats();
  EXPECT_EQ(st.unconfirmed_expired, 1u);
  EXPECT_EQ(st.connections_accepted, 0u);
  EXPECT_EQ(st.connections_active, 0u);
  EXPECT_EQ(accepted.load(), 0);
  close(fd);
  // And the server still serves a normal client, which does reach the callback.
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", srv.port, Client());
  ASSERT_TRUE(c.ok()) << c.status();
  end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (accepted.load() == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(accepted.load(), 1);
  EXPECT_EQ(srv.ep->stats().connections_accepted, 1u);
}

// Connection ids come from the system's randomness, not from the seed: two endpoints
// given the same seed do not repeat each other's ids.
TEST(Endpoint, ConnectionIdsAreNotReproducibleFromTheSeed) {
  Server srv = StartServer();
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    EndpointOptions eo = Insecure();
    eo.seed = 42;
    absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
    ASSERT_TRUE(ep.ok()) << ep.status();
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
        (*ep)->Connect("127.0.0.1", srv.port, Client());
    ASSERT_TRUE(c.ok()) << c.status();
    ids.push_back((*c)->info().local_id);
  }
  EXPECT_NE(ids[0], ids[1]);
}

// Datagrams of another protocol (first byte not longhaul's version) go to the listen's
// handler with a kernel receive time, its replies go back to the sender, and the same
// port still serves longhaul clients. Without a handler they are dropped as undecodable.
TEST(Endpoint, ForeignDatagramsReachTheListenHandlerAndItsRepliesTheSender) {
  std::atomic<int> calls{0};
  std::atomic<int64_t> kernel_ns{0};
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  lo.on_foreign_datagram = [&](const ForeignDatagram& f,
                               std::vector<std::vector<uint8_t>>* replies) {
    ++calls;
    kernel_ns.store(f.kernel_time_ns);
    std::vector<uint8_t> r(f.data.begin(), f.data.end());
    std::reverse(r.begin(), r.end());
    replies->push_back(std::move(r));
    EXPECT_NE(f.from.find("127.0.0.1:"), std::string::npos) << f.from;
  };
  Server srv = StartServer(std::move(lo));
  const int fd = RawSocketTo(srv.port);
  ASSERT_GE(fd, 0);
  const uint8_t probe[] = {0xB7, 1, 2, 3};
  const int64_t before = RealtimeNs();
  ASSERT_EQ(send(fd, probe, sizeof(probe), 0), static_cast<ssize_t>(sizeof(probe)));
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  uint8_t buf[64];
  ASSERT_EQ(recv(fd, buf, sizeof(buf), 0), 4);
  EXPECT_EQ(buf[0], 3);
  EXPECT_EQ(buf[3], 0xB7);
  EXPECT_EQ(calls.load(), 1);
  // SO_TIMESTAMPNS: a CLOCK_REALTIME time at or after the send.
  EXPECT_GE(kernel_ns.load(), before);
  EXPECT_LT(kernel_ns.load(), before + 60'000'000'000);
  EndpointStats st = srv.ep->stats();
  EXPECT_EQ(st.foreign_datagrams, 1u);
  EXPECT_EQ(st.foreign_replies, 1u);
  EXPECT_EQ(st.undecodable, 0u);
  close(fd);
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  EXPECT_TRUE(cep->Connect("127.0.0.1", srv.port, Client()).ok());
  EXPECT_EQ(calls.load(), 1);  // longhaul's own packets never reach the handler
}

TEST(Endpoint, VanishedPeerIsReportedAsUnreachable) {
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  lo.config.idle_timeout = Duration::Milliseconds(700);
  lo.config.keepalive = Duration::Milliseconds(100);
  Server srv = StartServer(std::move(lo));
  absl::StatusOr<std::unique_ptr<testing::LoopbackRelay>> relay =
      testing::LoopbackRelay::Start(srv.port);
  ASSERT_TRUE(relay.ok()) << relay.status();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  TransportConfig cfg = testing::LoopbackTestConfig();
  cfg.keepalive = Duration::Milliseconds(100);
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", (*relay)->port(), Client(cfg));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*c)->config().idle_timeout, Duration::Milliseconds(700));  // negotiated min
  (*relay)->Cut();  // the peer vanishes (no CLOSE)
  Event e;
  ASSERT_TRUE(WaitFor(**s, Event::Type::kClosed, &e));
  EXPECT_TRUE(absl::IsDeadlineExceeded(e.status)) << e.status;
  EXPECT_NE(e.status.message().find("peer unreachable"), std::string::npos) << e.status;
  ASSERT_TRUE(WaitFor(**c, Event::Type::kClosed, &e));
  EXPECT_NE(e.status.message().find("peer unreachable"), std::string::npos) << e.status;
}

TEST(Endpoint, ShutdownClosesConnectionsAndCancelsPendingSends) {
  Server srv = StartServer();
  std::unique_ptr<Endpoint> cep = NewEndpoint();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
      cep->Connect("127.0.0.1", srv.port, Client());
  ASSERT_TRUE(c.ok());
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = srv.ep->Accept(kWait);
  ASSERT_TRUE(s.ok());
  std::vector<uint8_t> big(64 << 20);
  absl::StatusOr<uint64_t> id = (*c)->Send(SendBuffer{big.data(), big.size()}, 9);
  ASSERT_TRUE(id.ok());
  cep->Close();
  EXPECT_TRUE((*c)->closed());
  Event e;
  bool cancelled = false, closed = false;
  while ((*c)->Poll(&e)) {
    if (e.type == Event::Type::kSendComplete && e.message_id == *id) cancelled = !e.status.ok();
    if (e.type == Event::Type::kClosed) closed = true;
  }
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(closed);
  EXPECT_FALSE((*c)->Send(SendBuffer{big.data(), 1}, 1).ok());
  // The server learns of it from the CLOSE.
  ASSERT_TRUE(WaitFor(**s, Event::Type::kClosed, &e));
  EXPECT_FALSE(e.status.ok());
  EXPECT_NE(e.status.message().find("endpoint closed"), std::string::npos) << e.status;
  EXPECT_TRUE(absl::IsCancelled(cep->Accept(Duration::Milliseconds(10)).status()));
}

TEST(Endpoint, ListenOnABusyPortFails) {
  Server srv = StartServer();
  std::unique_ptr<Endpoint> other = NewEndpoint();
  ListenOptions lo;
  lo.config = testing::LoopbackTestConfig();
  absl::StatusOr<uint16_t> p = other->Listen("127.0.0.1", srv.port, lo);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("in use"), std::string::npos) << p.status();
  EXPECT_FALSE(other->Listen("not-an-ip", 0, lo).ok());
}

}  // namespace
}  // namespace longhaul
