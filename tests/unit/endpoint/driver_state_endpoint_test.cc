// The driver-state channel through the sans-IO endpoint, in virtual time: a state set
// on one side's connection reaches the other side's driver as a kDriverState event (one
// until the driver takes it), both ways, plaintext and sealed, and a state that confirms
// a server connection is reported right after its kIncoming.

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/pattern.h"
#include "tests/support/test_config.h"
#include "tests/unit/endpoint/endpoint_net_test_ids.h"
#include "transport/endpoint/handshake.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/testing/endpoint_net.h"

namespace longhaul::endpoint::endpoint_net_test {
namespace {

using ::longhaul::testing::Pattern;

// A seeded entropy source: the runs are deterministic.
EntropySource Seeded(uint64_t seed) {
  auto rng = std::make_shared<Rng>(seed);
  return [rng](std::span<uint8_t> out) {
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng->Next());
  };
}

// Plaintext, or sealed with a pre-shared key.
EndpointConfig Config(uint64_t seed, bool sealed) {
  EndpointConfig c = ::longhaul::testing::InsecureEndpointConfig(seed);
  if (sealed) {
    c.security = SecurityConfig{};
    crypto::Key32 psk;
    psk.fill(7);
    c.security.psk = psk;
    c.security.entropy = Seeded(seed + 100);
  }
  return c;
}

std::vector<EndpointEvent> Of(const std::vector<EndpointEvent>& ev, EndpointEvent::Type t) {
  std::vector<EndpointEvent> out;
  std::copy_if(ev.begin(), ev.end(), std::back_inserter(out),
               [&](const EndpointEvent& e) { return e.type == t; });
  return out;
}
size_t CountOf(const std::vector<EndpointEvent>& ev, EndpointEvent::Type t) {
  return Of(ev, t).size();
}

class DriverStateEndpointTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    net_ = std::make_unique<EndpointNet>(Duration::Milliseconds(10));
    server_ = net_->Add(Config(1, GetParam()));
    client_ = net_->Add(Config(2, GetParam()));
    ListenConfig lc;
    lc.config.initial_rtt = Duration::Milliseconds(20);
    ASSERT_TRUE(net_->node(server_).Listen(kListen, std::move(lc)).ok());
  }

  // Connects and runs until the client is connected; its id (0 on failure).
  ConnectionId Connect() {
    ConnectConfig cc;
    cc.config.initial_rtt = Duration::Milliseconds(20);
    absl::StatusOr<ConnectionId> id = net_->node(client_).Connect(
        net_->now(), EndpointNet::AddressOf(server_, kListen), {kClient}, std::move(cc));
    if (!id.ok()) return 0;
    if (!net_->RunUntil([&] { return net_->ConnectResult(client_) != nullptr; },
                        Duration::Seconds(5))) {
      return 0;
    }
    return net_->ConnectResult(client_)->type == EndpointEvent::Type::kConnected ? *id : 0;
  }
  ConnectionId ServerId() {
    net_->RunUntil(
        [&] { return CountOf(net_->events(server_), EndpointEvent::Type::kIncoming) > 0; },
        Duration::Seconds(2));
    std::vector<EndpointEvent> in = Of(net_->events(server_), EndpointEvent::Type::kIncoming);
    return in.empty() ? 0 : in[0].id;
  }

  // Connected, the client sending registered payloads by reference (zero copy); ids 0 on
  // failure.
  struct ByReference {
    ConnectionId cid = 0, sid = 0;
    Connection* c = nullptr;
    Connection* s = nullptr;
  };
  ByReference ConnectByReference() {
    ByReference p;
    p.cid = Connect();
    p.sid = p.cid == 0 ? 0 : ServerId();
    if (p.sid == 0) return ByReference{};
    p.c = net_->node(client_).ConnectionAt(p.cid);
    p.s = net_->node(server_).ConnectionAt(p.sid);
    p.c->SetPayloadByReference(true);
    return p;
  }
  // The server's delivered messages of connection `sid`, in order: where and how long.
  struct Got {
    const uint8_t* data = nullptr;
    uint64_t size = 0;
  };
  std::vector<Got> Delivered(ConnectionId sid) {
    std::vector<Got> out;
    for (const ::longhaul::testing::ConnectionEvent& e : net_->connection_events(server_)) {
      if (e.id == sid && e.event.type == Event::Type::kReceiveComplete) {
        out.push_back(Got{e.event.data, e.event.size});
      }
    }
    return out;
  }

  void Set(int node, ConnectionId id, const std::vector<uint8_t>& state) {
    ASSERT_TRUE(net_->node(node).ConnectionAt(id)->SetDriverState(state).ok());
    net_->node(node).Touch(id);
  }
  // Runs until `node` has `n` kDriverState events.
  bool RunUntilEvents(int node, size_t n) {
    return net_->RunUntil(
        [&] { return CountOf(net_->events(node), EndpointEvent::Type::kDriverState) >= n; },
        Duration::Seconds(2));
  }
  std::vector<uint8_t> Take(int node, ConnectionId id) {
    std::vector<uint8_t> out;
    EXPECT_TRUE(net_->node(node).ConnectionAt(id)->TakePeerDriverState(&out));
    return out;
  }

  std::unique_ptr<EndpointNet> net_;
  int server_ = 0, client_ = 1;
};

TEST_P(DriverStateEndpointTest, ReachesThePeerDriverBothWays) {
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  const ConnectionId sid = ServerId();
  ASSERT_NE(sid, 0u);
  EXPECT_EQ(CountOf(net_->events(server_), EndpointEvent::Type::kDriverState), 0u);

  // Client to server.
  const std::vector<uint8_t> qp = Pattern(64, 1);
  Set(client_, cid, qp);
  ASSERT_TRUE(RunUntilEvents(server_, 1));
  std::vector<EndpointEvent> ev = Of(net_->events(server_), EndpointEvent::Type::kDriverState);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].id, sid);
  EXPECT_EQ(Take(server_, sid), qp);

  // Server to client.
  const std::vector<uint8_t> grant = Pattern(wire::kMaxDriverState, 2);
  Set(server_, sid, grant);
  ASSERT_TRUE(RunUntilEvents(client_, 1));
  ev = Of(net_->events(client_), EndpointEvent::Type::kDriverState);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].id, cid);
  EXPECT_EQ(Take(client_, cid), grant);

  // Nothing more comes of either.
  net_->RunUntil([] { return false; }, Duration::Milliseconds(300));
  EXPECT_EQ(CountOf(net_->events(server_), EndpointEvent::Type::kDriverState), 1u);
  EXPECT_EQ(CountOf(net_->events(client_), EndpointEvent::Type::kDriverState), 1u);
}

TEST_P(DriverStateEndpointTest, OneEventUntilTheDriverTakesTheState) {
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  const ConnectionId sid = ServerId();
  ASSERT_NE(sid, 0u);
  Connection* server_conn = net_->node(server_).ConnectionAt(sid);
  Set(client_, cid, Pattern(100, 1));
  ASSERT_TRUE(RunUntilEvents(server_, 1));
  // A newer state arrives before the driver took the first: no second event, and the
  // driver then takes the newer one.
  const std::vector<uint8_t> newer = Pattern(120, 2);
  Set(client_, cid, newer);
  ASSERT_TRUE(net_->RunUntil([&] { return server_conn->stats().driver_state_received == 2; },
                             Duration::Seconds(2)));
  net_->RunUntil([] { return false; }, Duration::Milliseconds(100));
  EXPECT_EQ(CountOf(net_->events(server_), EndpointEvent::Type::kDriverState), 1u);
  EXPECT_EQ(Take(server_, sid), newer);
  // Taken: the next state gets an event of its own.
  const std::vector<uint8_t> third = Pattern(140, 3);
  Set(client_, cid, third);
  ASSERT_TRUE(RunUntilEvents(server_, 2));
  EXPECT_EQ(Take(server_, sid), third);
}

// The client's Confirm is lost and its first 1-RTT packet carries a state: that packet
// confirms the server's connection, and the state is reported right after kIncoming.
TEST_P(DriverStateEndpointTest, AStateThatConfirmsIsReportedAfterIncoming) {
  net_->set_filter([&](const NetDatagram& d) {
    NetVerdict v;
    absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(d.bytes);
    v.drop = d.from_node == client_ && m.ok() && m->kind == HandshakeKind::kConfirm;
    return v;
  });
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  EXPECT_EQ(CountOf(net_->events(server_), EndpointEvent::Type::kIncoming), 0u);
  const std::vector<uint8_t> state = Pattern(200, 4);
  Set(client_, cid, state);
  ASSERT_TRUE(RunUntilEvents(server_, 1));
  const std::vector<EndpointEvent>& ev = net_->events(server_);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, EndpointEvent::Type::kIncoming);
  EXPECT_EQ(ev[1].type, EndpointEvent::Type::kDriverState);
  EXPECT_EQ(ev[1].id, ev[0].id);
  EXPECT_EQ(Take(server_, ev[0].id), state);
}

// The datagram limit is a wire size, the seal included: a sealed connection's datagrams
// stay within it, and grow again when it is raised.
TEST_P(DriverStateEndpointTest, DatagramLimitBoundsWhatTheDriverSends) {
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  ASSERT_NE(ServerId(), 0u);
  size_t largest = 0;
  net_->set_filter([&](const NetDatagram& d) {
    if (d.from_node == client_) largest = std::max(largest, d.bytes.size());
    return NetVerdict{};
  });
  Connection* c = net_->node(client_).ConnectionAt(cid);
  const std::vector<uint8_t> data = Pattern(400'000, 5);
  auto transfer = [&](uint64_t tag) {
    largest = 0;
    ASSERT_TRUE(c->Send(SendBuffer{data.data(), data.size()}, tag).ok());
    net_->node(client_).Touch(cid);
    ASSERT_TRUE(net_->RunUntil([&] { return c->pending_send_messages() == 0; },
                               Duration::Seconds(10)));
  };
  c->SetDatagramLimit(1400);
  net_->node(client_).Touch(cid);
  EXPECT_EQ(c->debug_state().datagram_size, 1400u);
  transfer(1);
  EXPECT_LE(largest, 1400u);
  EXPECT_GT(largest, 1300u);
  // Raised to the configured size (plus the seal on a sealed connection).
  const ByteCount full = c->config().MaxDatagramSize() + (GetParam() ? wire::kSealExpansion : 0);
  c->SetDatagramLimit(full);
  net_->node(client_).Touch(cid);
  EXPECT_EQ(c->debug_state().datagram_size, full);
  transfer(2);
  EXPECT_GT(largest, 1400u);
  EXPECT_LE(largest, full);
}

// Zero copy: with SetPayloadByReference a plaintext connection leaves the DATA payloads
// of registered messages (SendBuffer::region) in the application's memory for the
// driver (EndpointNet copies them in, counting them), and the transfer is intact; a
// message without a region, and any sealed connection, are copied as before.
TEST_P(DriverStateEndpointTest, PayloadsByReferenceOnlyForRegisteredPlaintextMessages) {
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  const ConnectionId sid = ServerId();
  ASSERT_NE(sid, 0u);
  Connection* c = net_->node(client_).ConnectionAt(cid);
  c->SetPayloadByReference(true);
  const std::vector<uint8_t> data = Pattern(300'000, 9);
  auto transfer = [&](uint64_t region, uint64_t tag) {
    SendBuffer b{data.data(), data.size()};
    b.region = region;
    ASSERT_TRUE(c->Send(std::move(b), tag).ok());
    net_->node(client_).Touch(cid);
    ASSERT_TRUE(net_->RunUntil([&] { return c->pending_send_messages() == 0; },
                               Duration::Seconds(10)));
  };
  transfer(/*region=*/0, 1);
  EXPECT_EQ(net_->referenced_bytes(), 0u) << "a message without a region is copied";
  transfer(/*region=*/3, 2);
  if (GetParam()) {
    EXPECT_EQ(net_->referenced_bytes(), 0u) << "sealing is the one pass: nothing by reference";
  } else {
    // Nearly all of the message (short pieces are copied at once).
    EXPECT_GE(net_->referenced_bytes(), data.size() * 9 / 10);
  }
  const uint64_t before = net_->referenced_bytes();
  c->SetPayloadByReference(false);
  transfer(/*region=*/3, 3);
  EXPECT_EQ(net_->referenced_bytes(), before) << "off again: copied";
  // The server got all three messages intact.
  size_t intact = 0;
  for (const ::longhaul::testing::ConnectionEvent& e : net_->connection_events(server_)) {
    if (e.id != sid || e.event.type != Event::Type::kReceiveComplete) continue;
    ASSERT_EQ(e.event.size, data.size());
    ASSERT_NE(e.event.data, nullptr);
    EXPECT_EQ(0, std::memcmp(e.event.data, data.data(), data.size())) << "message " << e.event.tag;
    ++intact;
  }
  EXPECT_EQ(intact, 3u);
}

// Receive-side placement (docs/rdma.md 7.15): a payload the "NIC" wrote straight into the
// buffer posted for its message is checked there and never copied; delivered in that
// buffer, intact. Sealed connections send nothing by reference, so nothing is placed.
TEST_P(DriverStateEndpointTest, PlacedPayloadsAreCheckedInPostedBuffersAndNotCopied) {
  const ByReference p = ConnectByReference();
  ASSERT_NE(p.sid, 0u);
  const ConnectionId cid = p.cid, sid = p.sid;
  Connection* c = p.c;
  Connection* s = p.s;
  constexpr size_t kMessages = 3;
  const std::vector<uint8_t> data = Pattern(300'000, 5);
  std::vector<std::vector<uint8_t>> posted(kMessages, std::vector<uint8_t>(data.size()));
  for (size_t i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(s->PostReceive(posted[i].data(), posted[i].size(), 100 + i).ok());
  }
  size_t lost = 0;
  uint64_t lost_offset = 0;
  net_->set_placer([&](int from, const wire::DeferredPayload& d) {
    if (from != client_ || d.message_id >= kMessages) return ::longhaul::testing::Placement{};
    // Every write of one piece of message 1 is lost five times (its first sending, tail
    // copies, resends): the stale bytes there fail the checksum until one lands.
    if (d.message_id == 1 && lost_offset == 0 && d.message_offset > 20'000) {
      lost_offset = d.message_offset;
    }
    const bool lose = d.message_id == 1 && d.message_offset == lost_offset && lost < 5;
    lost += lose;
    return ::longhaul::testing::Placement{posted[d.message_id].data() + d.message_offset, lose};
  });
  for (size_t i = 0; i < kMessages; ++i) {
    SendBuffer b{data.data(), data.size()};
    b.region = 3;
    ASSERT_TRUE(c->Send(std::move(b), i + 1).ok());
  }
  net_->node(client_).Touch(cid);
  ASSERT_TRUE(
      net_->RunUntil([&] { return c->pending_send_messages() == 0; }, Duration::Seconds(20)));
  const std::vector<Got> got = Delivered(sid);
  ASSERT_EQ(got.size(), kMessages);
  for (size_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(got[i].size, data.size());
    EXPECT_EQ(got[i].data, posted[i].data()) << "delivered in its posted buffer";
    EXPECT_EQ(0, std::memcmp(posted[i].data(), data.data(), data.size())) << i;
  }
  const std::array<uint64_t, 3>& r = net_->placed_results();
  if (GetParam()) {
    EXPECT_EQ(r[0] + r[1] + r[2], 0u) << "sealed: nothing by reference, nothing placed";
    EXPECT_EQ(s->stats().placed_payload_bytes, 0u);
    return;
  }
  EXPECT_EQ(lost, 5u);
  EXPECT_GE(r[static_cast<size_t>(Connection::Placed::kRefused)], 1u) << "the lost writes";
  EXPECT_EQ(s->stats().checksum_failures, r[static_cast<size_t>(Connection::Placed::kRefused)]);
  EXPECT_GT(r[static_cast<size_t>(Connection::Placed::kInPlace)], 0u);
  // Nearly every byte checked where it lay (short pieces go in the datagram).
  EXPECT_GE(s->stats().placed_payload_bytes, kMessages * data.size() * 9 / 10);
  EXPECT_LE(s->stats().placed_payload_bytes_copied, kMessages * data.size() / 10);
}

// A payload placed somewhere other than where its message lands (no buffer was posted:
// the message gets transport-owned memory) is copied there once, counted, and intact;
// a duplicated datagram finds its range received and changes nothing.
TEST_P(DriverStateEndpointTest, PlacedPayloadsElsewhereAreCopiedOnce) {
  const ByReference p = ConnectByReference();
  ASSERT_NE(p.sid, 0u);
  const ConnectionId cid = p.cid, sid = p.sid;
  Connection* c = p.c;
  Connection* s = p.s;
  const std::vector<uint8_t> data = Pattern(200'000, 6);
  std::vector<uint8_t> staging(data.size());
  net_->set_placer([&](int from, const wire::DeferredPayload& d) {
    if (from != client_ || d.message_id != 0) return ::longhaul::testing::Placement{};
    return ::longhaul::testing::Placement{staging.data() + d.message_offset, false};
  });
  uint64_t sent = 0;
  net_->set_filter([&](const ::longhaul::testing::NetDatagram& d) {
    ::longhaul::testing::NetVerdict v;
    v.duplicate = d.from_node == client_ && ++sent % 7 == 0;
    return v;
  });
  SendBuffer b{data.data(), data.size()};
  b.region = 3;
  ASSERT_TRUE(c->Send(std::move(b), 1).ok());
  net_->node(client_).Touch(cid);
  ASSERT_TRUE(
      net_->RunUntil([&] { return c->pending_send_messages() == 0; }, Duration::Seconds(20)));
  const std::vector<Got> got = Delivered(sid);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size, data.size());
  EXPECT_NE(got[0].data, staging.data());
  EXPECT_EQ(0, std::memcmp(got[0].data, data.data(), data.size()));
  const std::array<uint64_t, 3>& r = net_->placed_results();
  if (GetParam()) {
    EXPECT_EQ(r[0] + r[1] + r[2], 0u) << "sealed: nothing by reference, nothing placed";
    return;
  }
  EXPECT_GT(r[static_cast<size_t>(Connection::Placed::kCopied)], 0u);
  EXPECT_GT(r[static_cast<size_t>(Connection::Placed::kInPlace)], 0u) << "duplicates: no copy";
  EXPECT_EQ(r[static_cast<size_t>(Connection::Placed::kRefused)], 0u);
  EXPECT_EQ(s->stats().placed_payload_bytes, 0u);
  // Every byte at most once, duplicates and tail copies included.
  EXPECT_GE(s->stats().placed_payload_bytes_copied, data.size() * 9 / 10);
  EXPECT_LE(s->stats().placed_payload_bytes_copied, data.size());
  EXPECT_GT(s->stats().duplicate_data_bytes, 0u) << "the duplicates arrived and were dropped";
}

// Placement by key (the NCCL plugin's irecv buffers, docs/rdma.md 7.15): a message sent
// with a placement key whose payloads the "NIC" writes into the buffer offered under that
// key is delivered there (the offer adopted, tag = key, nothing copied); a keyed message
// whose offer was not advertised in time arrives in transport memory and the offer is
// withdrawn at once; an advertised offer comes back only once the datapath revoked it.
TEST_P(DriverStateEndpointTest, OfferedBuffersTakeTheirKeyedMessages) {
  const ByReference p = ConnectByReference();
  ASSERT_NE(p.sid, 0u);
  Connection* c = p.c;
  Connection* s = p.s;
  const std::vector<uint8_t> data = Pattern(200'000, 8);
  std::map<uint64_t, std::vector<uint8_t>> offered;
  for (uint64_t key : {21, 22, 23}) {
    offered[key].resize(data.size() + 100);
    ASSERT_TRUE(s->OfferReceive(key, offered[key].data(), offered[key].size()).ok());
  }
  EXPECT_EQ(s->OfferReceive(21, offered[22].data(), 10).code(), absl::StatusCode::kAlreadyExists);
  s->NoteOfferPlacement(23, true);
  std::set<uint64_t> adopted;
  net_->set_placer([&](int from, const wire::DeferredPayload& d) {
    // Offer 22 was not advertised in time: its message goes staged.
    if (from != client_ || d.placement_key != 21) return ::longhaul::testing::Placement{};
    if (adopted.insert(d.placement_key).second) {
      EXPECT_TRUE(s->AdoptOffer(d.placement_key, d.message_id, d.message_length).ok());
    }
    return ::longhaul::testing::Placement{offered[21].data() + d.message_offset, false};
  });
  for (uint64_t key : {21, 0, 22}) {
    SendBuffer b{data.data(), data.size()};
    b.region = 3;
    b.placement_key = key;
    ASSERT_TRUE(c->Send(std::move(b), key).ok());
  }
  SendBuffer bad{data.data(), 10};
  bad.placement_key = uint64_t{1} << 63;
  EXPECT_EQ(c->Send(std::move(bad), 0).status().code(), absl::StatusCode::kInvalidArgument);
  net_->node(client_).Touch(p.cid);
  std::vector<Event*> got, withdrawn;
  auto collect = [&] {
    got.clear();
    withdrawn.clear();
    for (::longhaul::testing::ConnectionEvent& e : net_->connection_events(server_)) {
      if (e.id != p.sid) continue;
      if (e.event.type == Event::Type::kReceiveComplete) got.push_back(&e.event);
      if (e.event.type == Event::Type::kOfferWithdrawn) withdrawn.push_back(&e.event);
    }
  };
  // An adopted offer is held until the datapath revoked the peer's access: this one
  // releases each at once.
  std::vector<uint64_t> released;
  ASSERT_TRUE(net_->RunUntil(
      [&] {
        uint64_t id = 0;
        while (s->TakeHeldComplete(&id)) {
          released.push_back(id);
          s->ReleaseDelivery(id);
          net_->node(server_).Touch(p.sid);
        }
        collect();
        return got.size() == 3 && c->pending_send_messages() == 0;
      },
      Duration::Seconds(20)));
  EXPECT_EQ(released, GetParam() ? std::vector<uint64_t>{} : std::vector<uint64_t>{0});
  for (const Event* e : got) {
    ASSERT_EQ(e->size, data.size());
    EXPECT_EQ(0, std::memcmp(e->data, data.data(), data.size())) << e->message_id;
  }
  EXPECT_NE(got[1]->data, offered[21].data());
  EXPECT_NE(got[2]->data, offered[22].data()) << "not advertised in time: staged";
  if (GetParam()) {
    EXPECT_TRUE(adopted.empty()) << "sealed: nothing by reference, nothing placed";
    EXPECT_NE(got[0]->data, offered[21].data());
  } else {
    EXPECT_EQ(got[0]->data, offered[21].data()) << "delivered in the adopted offer";
    EXPECT_EQ(got[0]->tag, 21u);
    EXPECT_GE(s->stats().placed_payload_bytes, data.size() * 9 / 10) << "checked in place";
    EXPECT_EQ(s->stats().placed_payload_bytes_copied, 0u);
  }
  EXPECT_TRUE(withdrawn.empty());
  const size_t left = GetParam() ? 3 : 2;
  EXPECT_EQ(s->offers().size(), left);
  s->WithdrawOffer(22);
  s->WithdrawOffer(23);
  if (GetParam()) s->WithdrawOffer(21);
  net_->node(server_).Touch(p.sid);
  ASSERT_TRUE(net_->RunUntil([&] { collect(); return withdrawn.size() >= left - 1; },
                             Duration::Seconds(2)));
  collect();
  ASSERT_EQ(withdrawn.size(), left - 1) << "offer 23 was advertised: not before its revoke";
  EXPECT_EQ(withdrawn[0]->tag, 22u);
  EXPECT_EQ(withdrawn[0]->data, offered[22].data());
  EXPECT_TRUE(withdrawn[0]->status.ok());
  s->OfferRevoked(23);
  net_->node(server_).Touch(p.sid);
  ASSERT_TRUE(net_->RunUntil([&] { collect(); return withdrawn.size() == left; },
                             Duration::Seconds(2)));
  EXPECT_EQ(withdrawn.back()->tag, 23u);
  EXPECT_TRUE(s->offers().empty());
}

// What is not a placed datagram of an established plaintext connection is refused and
// counted: garbage, a payload place outside the datagram, a sealed packet.
TEST_P(DriverStateEndpointTest, MalformedPlacedDatagramsAreRefused) {
  const ConnectionId cid = Connect();
  ASSERT_NE(cid, 0u);
  const ConnectionId sid = ServerId();
  ASSERT_NE(sid, 0u);
  SansIoEndpoint& server = net_->node(server_);
  std::vector<uint8_t> junk(100, 0x33);
  const uint64_t undecodable = server.counters().undecodable;
  EXPECT_EQ(server.OnPlacedDatagram(net_->now(), kListen, EndpointNet::AddressOf(client_, kClient),
                                    junk, 10, junk.data(), 10),
            Connection::Placed::kRefused);
  EXPECT_EQ(server.counters().undecodable, undecodable + 1);
  // A real packet of the connection, its payload place past its end.
  std::vector<uint8_t> packet;
  net_->set_filter([&](const ::longhaul::testing::NetDatagram& d) {
    if (d.from_node == client_ && packet.empty()) packet = d.bytes;
    return ::longhaul::testing::NetVerdict{};
  });
  Set(client_, cid, {1, 2, 3});
  ASSERT_TRUE(net_->RunUntil([&] { return !packet.empty(); }, Duration::Seconds(2)));
  Connection* s = net_->node(server_).ConnectionAt(sid);
  const uint64_t malformed = s->stats().malformed_packets;
  const uint64_t undecodable2 = server.counters().undecodable;
  std::vector<uint8_t> payload(64, 1);
  EXPECT_EQ(server.OnPlacedDatagram(net_->now(), kListen, EndpointNet::AddressOf(client_, kClient),
                                    packet, packet.size(), payload.data(), payload.size()),
            Connection::Placed::kRefused);
  if (GetParam()) {
    EXPECT_EQ(server.counters().undecodable, undecodable2 + 1) << "sealed: never placed";
  } else {
    EXPECT_EQ(s->stats().malformed_packets, malformed + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Security, DriverStateEndpointTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("Psk") : std::string("Plaintext");
                         });

}  // namespace
}  // namespace longhaul::endpoint::endpoint_net_test
