#include "transport/sim/scenario_endpoint.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/rng.h"
#include "transport/base/status.h"
#include "transport/crypto/primitives.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/sim/endpoint_node.h"

namespace longhaul::sim::internal {
namespace {

// A 32-byte key from the scenario seed, the pair and a label: deterministic, and
// different for every use.
crypto::Key32 DerivedKey(uint64_t seed, int pair, std::string_view label) {
  uint8_t in[12];
  for (int i = 0; i < 8; ++i) in[i] = static_cast<uint8_t>(seed >> (8 * i));
  for (int i = 0; i < 4; ++i)
    in[8 + i] = static_cast<uint8_t>(static_cast<uint32_t>(pair) >> (8 * i));
  return crypto::Sha256(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(label.data()), label.size()), in);
}

// A seeded entropy source for the ephemeral keys: the runs stay deterministic.
endpoint::EntropySource SeededEntropy(uint64_t seed) {
  auto rng = std::make_shared<Rng>(seed);
  return [rng](std::span<uint8_t> out) {
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng->Next());
  };
}

// A node's address: a tag byte and the node's simulator index.
endpoint::PeerAddress NodeAddress(int node) {
  const uint8_t b[5] = {0x51, static_cast<uint8_t>(node), static_cast<uint8_t>(node >> 8),
                        static_cast<uint8_t>(node >> 16), static_cast<uint8_t>(node >> 24)};
  return endpoint::PeerAddress(std::span<const uint8_t>(b, sizeof(b)));
}

// One side of a pair: an endpoint with the pair's application on its one connection.
class EndpointScenarioNode final : public EndpointNode, public ScenarioSide {
 public:
  // A client (`sender`) or a server (`receiver`): exactly one of them is given.
  EndpointScenarioNode(endpoint::EndpointConfig config, endpoint::PeerAddress self,
                       endpoint::PeerAddress peer, PairState* pair, SenderApp* sender,
                       ReceiverApp* receiver)
      : EndpointNode(std::move(config), self, peer),
        pair_(pair),
        sender_(sender),
        receiver_(receiver),
        app_(sender != nullptr ? static_cast<App*>(sender) : receiver),
        connect_at_(pair->start) {}

  // The client's handshake starts at the pair's start with `config`.
  void set_connect(endpoint::ConnectConfig config) { connect_ = std::move(config); }

  // ScenarioSide
  SimNode* node() override { return this; }
  const Connection* connection() const override { return conn_; }
  EndpointSideStats endpoint_stats() const override;

  // SimNode: the client's connect and its application's wakes besides the endpoint's.
  void OnTimeout(Time now) override;
  size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity, TransmitInfo* info) override;
  Time NextTimeout() const override;

 private:
  bool client() const { return sender_ != nullptr; }
  void OnDrain(Time now) override;
  void OnEndpointEvent(Time now, const endpoint::EndpointEvent& e);
  void Attach(endpoint::ConnectionId id);

  PairState* pair_;
  SenderApp* sender_;
  ReceiverApp* receiver_;
  App* app_;
  const Time connect_at_;
  endpoint::ConnectConfig connect_;
  bool connect_started_ = false;
  endpoint::ConnectionId id_ = 0;
  Connection* conn_ = nullptr;  // owned by the endpoint, never released
};

void EndpointScenarioNode::OnTimeout(Time now) {
  set_now(now);
  if (client() && !connect_started_ && now >= connect_at_) {
    connect_started_ = true;
    absl::StatusOr<endpoint::ConnectionId> id =
        ep().Connect(now, peer(), {kLocal}, std::move(connect_));
    if (!id.ok()) Fail(pair_, absl::StrCat("Connect failed: ", id.status().ToString()));
  }
  if (conn_ != nullptr && app_->NextWake() <= now) {
    app_->OnWake(now, *conn_);
    ep().Touch(id_);
  }
}

size_t EndpointScenarioNode::PollTransmit(Time now, uint8_t* buffer, size_t capacity,
                                          TransmitInfo* info) {
  const size_t n = EndpointNode::PollTransmit(now, buffer, capacity, info);
  // Goodput counts from the first datagram after the handshake (see ConnectionResult).
  if (n > 0 && conn_ != nullptr && client() && pair_->result.first_send.IsInfinite()) {
    pair_->result.first_send = now;
  }
  return n;
}

Time EndpointScenarioNode::NextTimeout() const {
  Time t = EndpointNode::NextTimeout();
  if (client() && !connect_started_) t = std::min(t, connect_at_);
  if (conn_ != nullptr) t = std::min(t, app_->NextWake());
  return t;
}

void EndpointScenarioNode::Attach(endpoint::ConnectionId id) {
  id_ = id;
  conn_ = ep().ConnectionAt(id);
}

void EndpointScenarioNode::OnEndpointEvent(Time now, const endpoint::EndpointEvent& e) {
  using Type = endpoint::EndpointEvent::Type;
  if (e.type == Type::kConnectFailed) {
    Fail(pair_, absl::StrCat("handshake failed: ", e.status.ToString()));
  } else if (e.type == Type::kConnected && client() && conn_ == nullptr) {
    Attach(e.id);
    pair_->result.connected = true;
    pair_->result.handshake_s = (now - connect_at_).seconds();
    pair_->start = now;  // the workload starts now
    sender_->OnWake(now, *conn_);
    ep().Touch(id_);
  } else if (e.type == Type::kIncoming && !client() && conn_ == nullptr) {
    Attach(e.id);
    receiver_->Start(*conn_);
    ep().Touch(id_);
  }
}

void EndpointScenarioNode::OnDrain(Time now) {
  endpoint::EndpointEvent e;
  while (ep().PollEvent(&e)) OnEndpointEvent(now, e);
  if (conn_ == nullptr) return;
  Event ev;
  bool any = false;
  while (conn_->PollEvent(&ev)) {
    app_->OnEvent(now, *conn_, ev);
    ev = Event();
    any = true;
  }
  if (any) ep().Touch(id_);
}

EndpointSideStats EndpointScenarioNode::endpoint_stats() const {
  EndpointSideStats s;
  const endpoint::EndpointCounters& c = ep().counters();
  s.hellos_received = c.hellos_received;
  s.retries_sent = c.retries_sent;
  s.connections_accepted = c.connections_accepted;
  s.handshake_errors = c.handshake_errors;
  s.undecodable = c.undecodable;
  s.unknown_connection = c.unknown_connection;
  if (conn_ != nullptr) {
    if (const crypto::ProtectionCounters* p = ep().ProtectionAt(id_)) {
      s.packets_sealed = p->packets_sealed;
      s.packets_opened = p->packets_opened;
      s.auth_failures = p->auth_failures;
      s.replays = p->replays;
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<endpoint::SecurityConfig> ScenarioSecurityConfig(EndpointSecurity security,
                                                                uint64_t seed, int pair,
                                                                bool server) {
  if (security == EndpointSecurity::kNone) return endpoint::SecurityConfig::Insecure();
  endpoint::SecurityConfig s;
  s.entropy = SeededEntropy(Rng(seed ^ (server ? 0x5e7e : 0xc1e7)).Next() + pair);
  if (security == EndpointSecurity::kPsk) {
    s.psk = DerivedKey(seed, pair, "longhaul-sim psk");
  } else {
    LH_ASSIGN_OR_RETURN(crypto::KeyPair client_key,
                        crypto::KeyPairFromPrivate(DerivedKey(seed, pair, "longhaul-sim client")));
    LH_ASSIGN_OR_RETURN(crypto::KeyPair server_key,
                        crypto::KeyPairFromPrivate(DerivedKey(seed, pair, "longhaul-sim server")));
    s.key = server ? server_key : client_key;
    s.peer_keys.push_back(server ? client_key.public_key : server_key.public_key);
  }
  LH_RETURN_IF_ERROR(s.Validate());
  return s;
}

absl::StatusOr<EndpointPair> MakeEndpointPair(const ScenarioOptions& opt, PairState* pair,
                                              SenderApp* sender, ReceiverApp* receiver,
                                              uint64_t client_seed, uint64_t server_seed) {
  endpoint::EndpointConfig cc, sc;
  cc.seed = client_seed;
  sc.seed = server_seed;
  sc.cookie_secret = endpoint::SipKey{server_seed * 7 + 1, server_seed * 13 + 5};
  LH_ASSIGN_OR_RETURN(cc.security,
                      ScenarioSecurityConfig(opt.security, opt.seed, pair->index, false));
  LH_ASSIGN_OR_RETURN(sc.security,
                      ScenarioSecurityConfig(opt.security, opt.seed, pair->index, true));
  const endpoint::PeerAddress client_address = NodeAddress(2 * pair->index);
  const endpoint::PeerAddress server_address = NodeAddress(2 * pair->index + 1);
  auto client = std::make_unique<EndpointScenarioNode>(std::move(cc), client_address,
                                                       server_address, pair, sender, nullptr);
  auto server = std::make_unique<EndpointScenarioNode>(std::move(sc), server_address,
                                                       client_address, pair, nullptr, receiver);
  endpoint::ConnectConfig connect;
  connect.config = opt.sender_config;
  connect.timeout = kScenarioHandshakeTimeout;
  client->set_connect(std::move(connect));
  endpoint::ListenConfig listen;
  listen.config = opt.receiver_config;
  LH_RETURN_IF_ERROR(server->ep().Listen(EndpointNode::kLocal, std::move(listen)));
  EndpointPair p;
  p.client = std::move(client);
  p.server = std::move(server);
  return p;
}

}  // namespace longhaul::sim::internal
