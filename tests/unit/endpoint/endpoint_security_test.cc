// Packet protection through the sans-IO endpoint, in virtual time: the three key-exchange
// modes, wrong and unknown keys, mode mismatches, tampered / replayed / reflected packets
// dropped while the transfer completes intact, key updates under load, forged Confirms,
// plaintext packets for a protected connection, and what a path observer captures.

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/base/rng.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/endpoint/handshake.h"
#include "tests/support/pattern.h"
#include "tests/unit/endpoint/endpoint_net_test_ids.h"
#include "transport/testing/endpoint_net.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint::endpoint_net_test {
namespace {

crypto::KeyPair Pair(uint8_t v) {
  crypto::Key32 k;
  k.fill(v);
  return *crypto::KeyPairFromPrivate(k);
}
crypto::Key32 Psk(uint8_t v) {
  crypto::Key32 k;
  k.fill(v);
  return k;
}

// A seeded entropy source: the runs are deterministic.
EntropySource Seeded(uint64_t seed) {
  auto rng = std::make_shared<Rng>(seed);
  return [rng](std::span<uint8_t> out) {
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng->Next());
  };
}

SecurityConfig Keys(uint8_t own, std::vector<uint8_t> peers, std::optional<uint8_t> psk,
                    uint64_t seed) {
  SecurityConfig s;
  if (own != 0) s.key = Pair(own);
  for (uint8_t p : peers) s.peer_keys.push_back(Pair(p).public_key);
  if (psk) s.psk = Psk(*psk);
  s.entropy = Seeded(seed);
  return s;
}

EndpointConfig Config(uint64_t seed, SecurityConfig security) {
  EndpointConfig c;
  c.seed = seed;
  c.cookie_secret = SipKey{seed, seed + 1};
  c.security = std::move(security);
  return c;
}

TransportConfig Transport() {
  TransportConfig t;
  t.initial_rtt = Duration::Milliseconds(20);
  return t;
}

struct Sides {
  SecurityConfig server, client;
};

class SecurityTest : public ::testing::Test {
 protected:
  void Build(Sides s) {
    net_ = std::make_unique<EndpointNet>(Duration::Milliseconds(10));
    server_ = net_->Add(Config(1, std::move(s.server)));
    client_ = net_->Add(Config(2, std::move(s.client)));
    ASSERT_TRUE(net_->node(server_).Listen(kListen, ListenConfig{Transport()}).ok());
  }

  absl::StatusOr<ConnectionId> Connect() {
    ConnectConfig cc;
    cc.config = Transport();
    return net_->node(client_).Connect(net_->now(), EndpointNet::AddressOf(server_, kListen),
                                       {kClient}, cc);
  }

  const EndpointEvent* Result() { return net_->ConnectResult(client_); }

  bool Handshake() {
    return net_->RunUntil([&] { return Result() != nullptr; }, Duration::Seconds(10));
  }

  // Holds back the server's Accepts, at most `limit` of them (-1: all): each is kept in
  // *held (while it is empty) and not delivered.
  void HoldServerAccepts(std::vector<uint8_t>* held, int limit) {
    net_->set_filter([this, held, left = limit](const NetDatagram& d) mutable {
      NetVerdict v;
      if (d.from_node != server_ || !held->empty() || left == 0) return v;
      absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(d.bytes);
      if (m.ok() && m->kind == HandshakeKind::kAccept) {
        *held = d.bytes;
        v.drop = true;
        if (left > 0) --left;
      }
      return v;
    });
  }
  // Delivers to the client, from the server's address, `accept` with one bit of its
  // Noise bytes flipped: what anyone who saw the Hello could send. Empties `accept`.
  void InjectForgedAccept(std::vector<uint8_t>* accept) {
    absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(*accept);
    accept->clear();
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_FALSE(m->security.noise.empty());
    m->security.noise.back() ^= 1;
    absl::StatusOr<std::vector<uint8_t>> forged = BuildHandshakePacket(*m);
    ASSERT_TRUE(forged.ok()) << forged.status();
    net_->Inject(client_, kClient, EndpointNet::AddressOf(server_, kListen), *forged);
  }

  // Sends `data` client -> server; true when it arrived intact and the client saw it
  // acknowledged.
  bool Transfer(ConnectionId id, const std::vector<uint8_t>& data,
                Duration limit = Duration::Seconds(60)) {
    Connection* c = net_->node(client_).ConnectionAt(id);
    if (c == nullptr || !c->Send(SendBuffer{data.data(), data.size()}, 1).ok()) return false;
    net_->node(client_).Touch(id);
    const Event* got = nullptr;
    bool acked = false;
    net_->RunUntil(
        [&] {
          for (auto& e : net_->connection_events(server_)) {
            if (e.event.type == Event::Type::kReceiveComplete) got = &e.event;
          }
          for (auto& e : net_->connection_events(client_)) {
            if (e.event.type == Event::Type::kSendComplete) acked = e.event.status.ok();
          }
          return got != nullptr && acked;
        },
        limit);
    return got != nullptr && got->status.ok() && got->size == data.size() &&
           std::memcmp(got->data, data.data(), data.size()) == 0;
  }

  ConnectionId ServerConnection() {
    for (const EndpointEvent& e : net_->events(server_)) {
      if (e.type == EndpointEvent::Type::kIncoming) return e.id;
    }
    return 0;
  }

  std::unique_ptr<EndpointNet> net_;
  int server_ = 0, client_ = 1;
  ConnectionId client_id_ = 0;
};

std::vector<uint8_t> Text(size_t n) {
  const std::string phrase = "gradients and checkpoints cross the border; ";
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(phrase[i % phrase.size()]);
  return v;
}


bool Contains(const std::vector<uint8_t>& hay, const std::string& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

struct ModeCase {
  const char* name;
  Sides setup;
  SecurityMode mode;
};

std::vector<ModeCase> Modes() {
  return {
      {"static keys", {Keys(2, {1}, {}, 11), Keys(1, {2}, {}, 12)}, SecurityMode::kStaticKeys},
      {"static keys and psk", {Keys(2, {1}, 7, 11), Keys(1, {2}, 7, 12)},
       SecurityMode::kStaticKeysPsk},
      {"psk", {Keys(0, {}, 7, 11), Keys(0, {}, 7, 12)}, SecurityMode::kPsk},
  };
}

TEST_F(SecurityTest, EachModeConnectsAndWhatThePathSeesIsSealed) {
  for (const ModeCase& m : Modes()) {
    SCOPED_TRACE(m.name);
    Build(m.setup);
    std::vector<uint8_t> capture;  // the 1-RTT payloads a path observer sees
    int plaintext_onertt = 0;
    net_->set_filter([&](const NetDatagram& d) {
      absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(d.bytes);
      if (h.ok() && h->type == wire::PacketType::kSealed) {
        capture.insert(capture.end(), d.bytes.begin() + wire::kHeaderSize, d.bytes.end());
      } else if (h.ok() && h->type == wire::PacketType::kOneRtt) {
        ++plaintext_onertt;
      }
      return NetVerdict{};
    });
    absl::StatusOr<ConnectionId> id = Connect();
    ASSERT_TRUE(id.ok()) << id.status();
    ASSERT_TRUE(Handshake());
    ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected) << Result()->status;
    const std::vector<uint8_t> data = Text(400'000);
    ASSERT_TRUE(Transfer(*id, data));
    EXPECT_EQ(plaintext_onertt, 0);
    EXPECT_GT(capture.size(), data.size());
    // Indistinguishable from random: nothing to compress.
    EXPECT_GT(testing::Entropy(capture), 7.99);
    EXPECT_LT(testing::Entropy(data), 4.5);
    EXPECT_FALSE(Contains(capture, "gradients and checkpoints"));
    const ConnectionMeta* cm = net_->node(client_).MetaAt(*id);
    const ConnectionMeta* sm = net_->node(server_).MetaAt(ServerConnection());
    ASSERT_TRUE(cm && sm);
    EXPECT_EQ(cm->security, m.mode);
    EXPECT_EQ(sm->security, m.mode);
    EXPECT_EQ(cm->cipher, sm->cipher);
    if (m.mode != SecurityMode::kPsk) {
      ASSERT_TRUE(sm->peer_static_key.has_value());
      EXPECT_EQ(*sm->peer_static_key, Pair(1).public_key);
    }
    const crypto::ProtectionCounters* pc = net_->node(client_).ProtectionAt(*id);
    ASSERT_NE(pc, nullptr);
    EXPECT_GT(pc->packets_sealed, 40u);
    EXPECT_GT(pc->packets_opened, 0u);  // the server's ACKs
    EXPECT_EQ(net_->node(server_).counters().packets_unauthenticated, 0u);
  }
}

TEST_F(SecurityTest, PlaintextTransferIsReadableOnThePath) {
  Build({SecurityConfig::Insecure(), SecurityConfig::Insecure()});
  std::vector<uint8_t> capture;
  net_->set_filter([&](const NetDatagram& d) {
    capture.insert(capture.end(), d.bytes.begin(), d.bytes.end());
    return NetVerdict{};
  });
  absl::StatusOr<ConnectionId> id = Connect();
  ASSERT_TRUE(Handshake());
  ASSERT_TRUE(Transfer(*id, Text(200'000)));
  EXPECT_TRUE(Contains(capture, "gradients and checkpoints"));
  EXPECT_LT(testing::Entropy(capture), 5.0);
}

TEST_F(SecurityTest, WrongOrUnknownKeysAreRefusedWithoutServerState) {
  struct Case {
    const char* what;
    Sides setup;
    const char* client_error;
    uint64_t EndpointCounters::*server_counter;
  };
  const std::vector<Case> cases = {
      {"the client expects another server key",
       {Keys(2, {1}, {}, 11), Keys(1, {3}, {}, 12)},
       "refused the client's keys", &EndpointCounters::handshake_auth_failures},
      {"the server does not allow the client's key",
       {Keys(2, {4}, {}, 11), Keys(1, {2}, {}, 12)},
       "refused the client's keys", &EndpointCounters::keys_refused},
      {"pre-shared keys differ",
       {Keys(0, {}, 7, 11), Keys(0, {}, 8, 12)},
       "refused the client's keys", &EndpointCounters::handshake_auth_failures},
      {"pre-shared keys differ with static keys",
       {Keys(2, {1}, 7, 11), Keys(1, {2}, 8, 12)},
       "refused the client's keys", &EndpointCounters::handshake_auth_failures},
      {"plaintext client, protected server",
       {Keys(2, {1}, {}, 11), SecurityConfig::Insecure()},
       "requires packet protection", &EndpointCounters::security_mismatches},
      {"protected client, plaintext server",
       {SecurityConfig::Insecure(), Keys(1, {2}, {}, 12)},
       "runs without packet protection", &EndpointCounters::security_mismatches},
      {"static keys against a psk server",
       {Keys(0, {}, 7, 11), Keys(1, {2}, {}, 12)},
       "authenticates with Noise NNpsk0", &EndpointCounters::security_mismatches},
  };
  // What a client may hold (own key 1): neither it nor its hex may appear in what the
  // server sends back in the clear.
  const crypto::Key32 client_key = Pair(1).public_key;
  const std::string client_key_raw(client_key.begin(), client_key.end());
  const std::string client_key_hex = crypto::ToHex(client_key);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Build(c.setup);
    std::vector<uint8_t> from_server;
    net_->set_filter([&](const NetDatagram& d) {
      if (d.from_node == server_) from_server.insert(from_server.end(), d.bytes.begin(), d.bytes.end());
      return NetVerdict{};
    });
    ASSERT_TRUE(Connect().ok());
    ASSERT_TRUE(Handshake());
    const EndpointEvent* r = Result();
    ASSERT_EQ(r->type, EndpointEvent::Type::kConnectFailed);
    EXPECT_TRUE(absl::IsFailedPrecondition(r->status)) << r->status;
    EXPECT_THAT(std::string(r->status.message()), HasSubstr(c.client_error));
    ASSERT_FALSE(from_server.empty());
    EXPECT_FALSE(Contains(from_server, client_key_raw));
    EXPECT_FALSE(Contains(from_server, client_key_hex));
    EXPECT_FALSE(Contains(from_server, "does not allow"));
    EXPECT_FALSE(Contains(from_server, "did not authenticate"));
    EXPECT_EQ(net_->node(server_).connection_count(), 0u);
    EXPECT_EQ(net_->node(server_).counters().*c.server_counter, 1u);
    EXPECT_EQ(net_->node(server_).counters().rejects_sent, 1u);
  }
}

TEST_F(SecurityTest, AnAcceptThatDoesNotAuthenticateIsIgnoredUntilTheRealOne) {
  for (const ModeCase& mode : Modes()) {
    SCOPED_TRACE(mode.name);
    Build(mode.setup);
    // The server's first Accept is held back and a forged copy delivered instead.
    std::vector<uint8_t> held;
    HoldServerAccepts(&held, 1);
    ASSERT_TRUE(Connect().ok());
    ASSERT_TRUE(net_->RunUntil([&] { return !held.empty(); }, Duration::Seconds(5)));
    InjectForgedAccept(&held);
    // Ignored and counted; the server's own Accept (sent again when the client's Hello
    // comes again) completes the handshake.
    ASSERT_TRUE(Handshake());
    ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected) << Result()->status;
    EXPECT_EQ(net_->node(client_).counters().handshake_auth_failures, 1u);
  }
}

TEST_F(SecurityTest, AcceptsThatNeverAuthenticateEndTheAttemptAtItsDeadline) {
  Build(Modes()[0].setup);
  // Every Accept of the server is held back and a forged copy delivered instead.
  std::vector<uint8_t> held;
  HoldServerAccepts(&held, -1);
  ASSERT_TRUE(Connect().ok());
  int forged_count = 0;
  for (int round = 0; round < 100 && Result() == nullptr; ++round) {
    net_->RunUntil([&] { return !held.empty() || Result() != nullptr; }, Duration::Seconds(10));
    if (held.empty()) continue;
    InjectForgedAccept(&held);
    ++forged_count;
  }
  const EndpointEvent* r = Result();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, EndpointEvent::Type::kConnectFailed);
  EXPECT_TRUE(absl::IsPermissionDenied(r->status)) << r->status;
  EXPECT_THAT(std::string(r->status.message()), HasSubstr("did not prove the server's key"));
  EXPECT_GE(forged_count, 1);
  EXPECT_EQ(net_->node(client_).counters().handshake_auth_failures,
            static_cast<uint64_t>(forged_count));
}

TEST_F(SecurityTest, TamperedReplayedAndReflectedPacketsAreDroppedAndCounted) {
  Build(Modes()[0].setup);
  Rng rng(5);
  uint64_t tampered = 0, replayed = 0, reflected = 0;
  net_->set_filter([&](const NetDatagram& d) {
    NetVerdict v;
    absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(d.bytes);
    if (!h.ok() || h->type != wire::PacketType::kSealed) return v;
    const uint64_t r = rng.Next() % 100;
    if (r < 3) {
      v.corrupt = true;
      ++tampered;
    } else if (r < 6) {
      v.duplicate = true;  // the same sealed datagram twice: a replay
      ++replayed;
    } else if (r < 8 && d.from_node == client_) {
      // Reflect it: the client receives its own datagram back, as from the server, once
      // as it is (its connection id is the server's: no connection of the client's) and
      // once with the id rewritten to the client's own (the header is authenticated, and
      // the keys are per direction).
      net_->Inject(client_, kClient, EndpointNet::AddressOf(server_, kListen), d.bytes);
      std::vector<uint8_t> rewritten = d.bytes;
      const uint64_t own = net_->node(client_).MetaAt(client_id_)->id;
      for (int i = 0; i < 8; ++i) rewritten[4 + i] = static_cast<uint8_t>(own >> (8 * (7 - i)));
      net_->Inject(client_, kClient, EndpointNet::AddressOf(server_, kListen), rewritten);
      ++reflected;
    }
    return v;
  });
  absl::StatusOr<ConnectionId> id = Connect();
  client_id_ = *id;
  ASSERT_TRUE(Handshake());
  ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected);
  ASSERT_TRUE(Transfer(*id, Text(3'000'000)));
  const EndpointCounters& s = net_->node(server_).counters();
  const EndpointCounters& c = net_->node(client_).counters();
  EXPECT_GT(tampered, 10u);
  EXPECT_GT(replayed, 10u);
  EXPECT_GT(reflected, 10u);
  EXPECT_GT(s.packets_unauthenticated + c.packets_unauthenticated, 0u);
  EXPECT_GE(s.packets_replayed + c.packets_replayed, replayed / 2);
  EXPECT_GE(c.unknown_connection, reflected);       // reflections as they are
  EXPECT_GE(c.packets_unauthenticated, reflected);  // and with the id rewritten
  // Nothing tampered was delivered: the core never saw a bad checksum or a bad frame.
  const Connection* sc = net_->node(server_).ConnectionAt(ServerConnection());
  EXPECT_EQ(sc->stats().malformed_packets, 0u);
}

// One pass: payloads are opened straight into the message's buffer, and a tampered copy
// of a packet that arrives before the packet itself (its payload decrypted into a range
// not received yet, then refused by the tag) neither corrupts the message nor counts.
TEST_F(SecurityTest, TamperedCopiesOpenedIntoPlaceNeverReachTheMessage) {
  Build(Modes()[2].setup);
  Rng rng(17);
  uint64_t injected = 0;
  net_->set_filter([&](const NetDatagram& d) {
    absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(d.bytes);
    if (h.ok() && h->type == wire::PacketType::kSealed && d.from_node == client_ &&
        d.bytes.size() > 2000 && rng.Next() % 10 == 0) {
      // The copy arrives now, the packet after the link's delay. Flip one bit of the
      // payload's ciphertext (a third of the way in, past any frame in front of it).
      std::vector<uint8_t> t = d.bytes;
      t[t.size() / 3] ^= 0x04;
      net_->Inject(server_, kListen, EndpointNet::AddressOf(client_, kClient), t);
      ++injected;
    }
    return NetVerdict{};
  });
  absl::StatusOr<ConnectionId> id = Connect();
  ASSERT_TRUE(Handshake());
  ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected);
  ASSERT_TRUE(Transfer(*id, Text(4'000'000)));
  const EndpointCounters& s = net_->node(server_).counters();
  EXPECT_GT(injected, 20u);
  EXPECT_GT(s.payloads_opened_in_place, 100u);
  EXPECT_GT(s.in_place_auth_failures, injected / 2);
  EXPECT_GE(s.packets_unauthenticated, s.in_place_auth_failures);
  const Connection* sc = net_->node(server_).ConnectionAt(ServerConnection());
  EXPECT_EQ(sc->stats().malformed_packets, 0u);
  EXPECT_EQ(sc->stats().data_bytes_received, 4'000'000u);
}

TEST_F(SecurityTest, KeyUpdatesUnderLoadLoseNothing) {
  Sides s = Modes()[0].setup;
  s.server.key_update.max_packets = 150;
  s.client.key_update.max_packets = 150;
  Build(s);
  Rng rng(9);
  net_->set_filter([&](const NetDatagram& d) {
    NetVerdict v;
    v.drop = rng.Next() % 100 == 0;
    if (rng.Next() % 50 == 0) v.extra_delay = Duration::Milliseconds(5);  // reordering
    return v;
  });
  absl::StatusOr<ConnectionId> id = Connect();
  ASSERT_TRUE(Handshake());
  ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected);
  ASSERT_TRUE(Transfer(*id, Text(16'000'000)));
  const crypto::ProtectionCounters* cc = net_->node(client_).ProtectionAt(*id);
  const crypto::ProtectionCounters* sc = net_->node(server_).ProtectionAt(ServerConnection());
  ASSERT_TRUE(cc && sc);
  EXPECT_GE(cc->key_updates_sent, 5u);
  EXPECT_GE(sc->key_updates_received, cc->key_updates_sent - 1);
  EXPECT_EQ(sc->auth_failures, 0u);
  EXPECT_EQ(cc->auth_failures, 0u);
}

TEST_F(SecurityTest, ForgedConfirmDoesNotConfirm) {
  Build(Modes()[0].setup);
  // Drop the client's Confirm and everything after it; inject a Confirm with a wrong proof.
  net_->set_filter([&](const NetDatagram& d) {
    NetVerdict v;
    v.drop = d.from_node == client_ && d.index >= 2;
    return v;
  });
  absl::StatusOr<ConnectionId> id = Connect();
  ASSERT_TRUE(Handshake());
  ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected);
  const ConnectionMeta* cm = net_->node(client_).MetaAt(*id);
  HandshakeMessage confirm;
  confirm.kind = HandshakeKind::kConfirm;
  confirm.client_cid = cm->id;
  confirm.server_cid = cm->peer_id;
  confirm.security.mode = static_cast<uint8_t>(SecurityMode::kStaticKeys);
  confirm.security.noise.assign(16, 0x42);
  absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(confirm);
  ASSERT_TRUE(pkt.ok());
  net_->Inject(server_, kListen, EndpointNet::AddressOf(client_, kClient), *pkt);
  EXPECT_EQ(net_->node(server_).counters().confirms_refused, 1u);
  for (const EndpointEvent& e : net_->events(server_)) {
    EXPECT_NE(e.type, EndpointEvent::Type::kIncoming);
  }
  // A plaintext 1-RTT packet for the protected connection is refused too.
  std::vector<uint8_t> plain(100);
  wire::PacketWriter w(plain.data(), plain.size());
  wire::PacketHeader h;
  h.connection_id = cm->peer_id;
  w.WriteHeader(h);
  ASSERT_TRUE(w.WritePing());
  plain.resize(w.Finish());
  net_->Inject(server_, kListen, EndpointNet::AddressOf(client_, kClient), plain);
  EXPECT_EQ(net_->node(server_).counters().plaintext_refused, 1u);
}

TEST_F(SecurityTest, HandshakeSurvivesLostAndReorderedMessages) {
  for (uint64_t drop : {0, 1, 2}) {  // client: Hello, Hello with cookie, Confirm
    SCOPED_TRACE(drop);
    Build(Modes()[1].setup);
    net_->set_filter([&](const NetDatagram& d) {
      NetVerdict v;
      v.drop = d.from_node == client_ && d.index == drop;
      if (d.from_node == server_ && d.index == 1) v.extra_delay = Duration::Milliseconds(300);
      return v;
    });
    absl::StatusOr<ConnectionId> id = Connect();
    ASSERT_TRUE(Handshake());
    ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected) << Result()->status;
    EXPECT_TRUE(Transfer(*id, Text(50'000)));
    EXPECT_EQ(net_->node(server_).counters().connections_accepted, 1u);
  }
}

// A replay of the client's Hello with its cookie, from the client's own address, within
// the cookie's lifetime (after the real connection is gone): the server answers it with
// an Accept (it cannot tell the replay from a retransmission), but only the client that
// holds the ephemeral key could confirm it, so nothing reaches the driver and the state
// is dropped at the confirm deadline.
TEST_F(SecurityTest, ReplayedHelloAndCookieNeverReachTheDriver) {
  for (const ModeCase& mode : Modes()) {
    SCOPED_TRACE(mode.name);
    Build(mode.setup);
    std::vector<uint8_t> captured;
    int accepts = 0;
    net_->set_filter([&](const NetDatagram& d) {
      absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(d.bytes);
      if (m.ok() && d.from_node == client_ && m->kind == HandshakeKind::kHello &&
          !m->cookie.empty() && captured.empty()) {
        captured = d.bytes;
      }
      if (m.ok() && d.from_node == server_ && m->kind == HandshakeKind::kAccept) ++accepts;
      return NetVerdict{};
    });
    absl::StatusOr<ConnectionId> id = Connect();
    ASSERT_TRUE(Handshake());
    ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected);
    ASSERT_TRUE(Transfer(*id, Text(10'000)));
    ASSERT_FALSE(captured.empty());
    const ConnectionId sid = ServerConnection();
    ASSERT_NE(sid, 0u);
    // The client closes; the server's driver releases the connection.
    net_->node(client_).ConnectionAt(*id)->Close(CloseCode::kApplication, "done");
    net_->node(client_).Touch(*id);
    ASSERT_TRUE(net_->RunUntil(
        [&] { return net_->node(server_).ConnectionAt(sid)->closed(); }, Duration::Seconds(5)));
    net_->node(server_).Release(sid);
    ASSERT_EQ(net_->node(server_).connection_count(), 0u);
    const int accepts_before = accepts;
    net_->Inject(server_, kListen, EndpointNet::AddressOf(client_, kClient), captured);
    ASSERT_TRUE(net_->RunUntil([&] { return accepts > accepts_before; }, Duration::Seconds(1)));
    EXPECT_EQ(net_->node(server_).connection_count(), 1u);  // held by the endpoint only
    ASSERT_TRUE(net_->RunUntil(
        [&] { return net_->node(server_).counters().unconfirmed_expired == 1; },
        Duration::Seconds(15)));
    EXPECT_EQ(net_->node(server_).connection_count(), 0u);
    int incoming = 0;
    for (const EndpointEvent& e : net_->events(server_)) {
      incoming += e.type == EndpointEvent::Type::kIncoming;
    }
    EXPECT_EQ(incoming, 1);  // the real connection only
    EXPECT_EQ(net_->node(server_).counters().connections_accepted, 1u);
  }
}

// Connection ids come from the injected source when there is one: endpoints with the
// same seed then give different ids (drivers inject the system's randomness); without
// one they repeat (the simulator's determinism).
TEST(ConnectionIds, ComeFromTheInjectedSourceNotTheSeed) {
  auto first_ids = [](EntropySource source) {
    EndpointConfig c = Config(5, SecurityConfig::Insecure());
    c.id_entropy = std::move(source);
    SansIoEndpoint ep(c);
    ConnectConfig cc;
    cc.config = Transport();
    std::vector<ConnectionId> ids;
    for (LocalId l = 10; l < 14; ++l) {
      absl::StatusOr<ConnectionId> id =
          ep.Connect(Time::Zero(), EndpointNet::AddressOf(0, 1), {l}, cc);
      EXPECT_TRUE(id.ok()) << id.status();
      ids.push_back(id.ok() ? *id : 0);
    }
    return ids;
  };
  EXPECT_EQ(first_ids(nullptr), first_ids(nullptr));
  uint64_t counter = 0;
  auto counting = [&counter](std::span<uint8_t> out) {
    for (uint8_t& b : out) b = 0;
    ++counter;
    std::memcpy(out.data(), &counter, std::min(out.size(), sizeof(counter)));
  };
  const std::vector<ConnectionId> a = first_ids(counting);
  EXPECT_EQ(a, (std::vector<ConnectionId>{1, 2, 3, 4}));  // exactly what the source gave
  const std::vector<ConnectionId> b = first_ids(counting);
  EXPECT_EQ(b, (std::vector<ConnectionId>{5, 6, 7, 8}));
}

// Only the server the Hello went to may answer it: an Accept (the genuine one, copied),
// a Reject and a Retry from another address are counted and ignored, and the handshake
// completes with the server's own Accept.
TEST_F(SecurityTest, HandshakeRepliesFromAnotherAddressAreIgnored) {
  Build(Modes()[0].setup);
  std::vector<uint8_t> held;
  HoldServerAccepts(&held, 1);
  absl::StatusOr<ConnectionId> id = Connect();
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(net_->RunUntil([&] { return !held.empty(); }, Duration::Seconds(2)));
  const PeerAddress elsewhere = EndpointNet::AddressOf(server_, kListen + 1);
  net_->Inject(client_, kClient, elsewhere, held);
  HandshakeMessage reject;
  reject.kind = HandshakeKind::kReject;
  reject.client_cid = *id;
  reject.reason = "go away";
  HandshakeMessage retry;
  retry.kind = HandshakeKind::kRetry;
  retry.client_cid = *id;
  retry.cookie.assign(32, 7);
  for (const HandshakeMessage& m : {reject, retry}) {
    absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(m);
    ASSERT_TRUE(pkt.ok()) << pkt.status();
    net_->Inject(client_, kClient, elsewhere, *pkt);
  }
  EXPECT_EQ(net_->node(client_).counters().handshake_wrong_source, 3u);
  EXPECT_EQ(Result(), nullptr);  // neither connected by the copy nor ended by the others
  ASSERT_TRUE(Handshake());
  ASSERT_EQ(Result()->type, EndpointEvent::Type::kConnected) << Result()->status;
  EXPECT_TRUE(Transfer(*id, Text(10'000)));
}

TEST_F(SecurityTest, SameSeedsSameRun) {
  auto run = [&] {
    Build(Modes()[2].setup);
    absl::StatusOr<ConnectionId> id = Connect();
    EXPECT_TRUE(Handshake());
    EXPECT_TRUE(Transfer(*id, Text(100'000)));
    return net_->trace_hash();
  };
  EXPECT_EQ(run(), run());
}

TEST(SecurityConfigTest, ChoicesAreExplicitAndConsistent) {
  SecurityConfig none;
  EXPECT_THAT(std::string(none.Validate().message()), HasSubstr("no keys"));
  SecurityConfig both = SecurityConfig::Insecure();
  both.psk = Psk(1);
  EXPECT_THAT(std::string(both.Validate().message()), HasSubstr("together with keys"));
  SecurityConfig lonely = Keys(1, {}, {}, 1);
  EXPECT_THAT(std::string(lonely.Validate().message()), HasSubstr("without the peer's public key"));
  SecurityConfig orphan = Keys(0, {2}, {}, 1);
  EXPECT_THAT(std::string(orphan.Validate().message()), HasSubstr("without this side's own"));
  SecurityConfig no_entropy = Keys(1, {2}, {}, 1);
  no_entropy.entropy = nullptr;
  EXPECT_THAT(std::string(no_entropy.Validate().message()), HasSubstr("entropy"));
  EXPECT_TRUE(Keys(1, {2}, {}, 1).Validate().ok());
  EXPECT_TRUE(Keys(0, {}, 3, 1).Validate().ok());
  EXPECT_TRUE(SecurityConfig::Insecure().Validate().ok());
  EXPECT_EQ(Keys(1, {2}, 3, 1).mode(), SecurityMode::kStaticKeysPsk);
  // A client with several peer keys must name the server's per connection.
  EndpointConfig c = Config(1, Keys(1, {2, 3}, {}, 1));
  SansIoEndpoint ep(c);
  ConnectConfig cc;
  cc.config = Transport();
  EXPECT_THAT(std::string(ep.Connect(Time::Zero(), EndpointNet::AddressOf(0, 1), {5}, cc)
                              .status()
                              .message()),
              HasSubstr("name the server's key"));
  cc.server_key = Pair(3).public_key;
  EXPECT_TRUE(ep.Connect(Time::Zero(), EndpointNet::AddressOf(0, 1), {5}, cc).ok());
}

}  // namespace
}  // namespace longhaul::endpoint::endpoint_net_test
