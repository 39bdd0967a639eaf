// Both sides of the handshake (docs/endpoint.md section 3) and its key exchange
// (docs/security.md section 2): the client's Connect, Hello resends and establishment;
// the server's stateless Retry, validation, negotiation and Accept; Confirm; Reject;
// handshake timers.

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/endpoint/endpoint_state.h"
#include "transport/endpoint/negotiation.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint {
namespace {

constexpr int kMaxRetries = 8;
constexpr Duration kMaxHandshakeBackoff = Duration::Seconds(1);
constexpr Duration kFirstAcceptBackoff = Duration::Milliseconds(200);

// A sealed packet is wire::kSealExpansion bytes longer than a checksummed one: the
// segment shrinks by as much, so protected datagrams are as large as plaintext ones would
// be and still fit the path MTU the configuration was made for.
TransportConfig SealedConfig(TransportConfig c, bool sealed) {
  if (sealed && c.segment > 64 + wire::kSealExpansion) c.segment -= wire::kSealExpansion;
  return c;
}

}  // namespace

absl::StatusOr<ConnectionId> SansIoEndpoint::Connect(Time now, const PeerAddress& server,
                                               std::vector<LocalId> locals,
                                               ConnectConfig config) {
  LH_RETURN_IF_ERROR(config.config.Validate());
  if (config.app_data.size() > kMaxAppDataSize) {
    return absl::InvalidArgumentError(absl::StrCat("connect: application data of ",
                                                   config.app_data.size(), " bytes exceeds ",
                                                   kMaxAppDataSize));
  }
  if (locals.empty()) return absl::InvalidArgumentError("connect: no local to send from");
  for (LocalId l : locals) {
    if (l == kNoLocal || listeners_.contains(l) || local_owner_.contains(l)) {
      return absl::AlreadyExistsError(absl::StrCat("connect: local ", l, " is in use"));
    }
  }
  auto p = std::make_unique<Pending>();
  p->cid = NewCid(/*client=*/true, config.id_tag);
  p->server = server;
  p->locals = std::move(locals);
  p->version = config.protocol_version != 0 ? config.protocol_version : kProtocolVersion;
  p->deadline = now + config.timeout;
  p->backoff = std::max(config.config.initial_rtt * 2, Duration::Milliseconds(100));
  p->next_resend = now + p->backoff;
  const SecurityMode mode = config_.security.mode();
  if (mode == SecurityMode::kStaticKeys || mode == SecurityMode::kStaticKeysPsk) {
    if (config.server_key) {
      p->server_key = config.server_key;
    } else if (config_.security.peer_keys.size() == 1) {
      p->server_key = config_.security.peer_keys[0];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "connect: ", config_.security.peer_keys.size(),
          " peer keys are configured; name the server's key for this connection"));
    }
  }
  p->config = std::move(config);
  HandshakeMessage& h = p->hello_message;
  h.kind = HandshakeKind::kHello;
  h.version = p->version;
  h.client_cid = p->cid;
  h.params = ParamsFor(p->config.config);
  h.app_data = p->config.app_data;
  if (mode != SecurityMode::kPlaintext) {
    h.security.mode = static_cast<uint8_t>(mode);
    h.security.ciphers = LocalCipherMask();
    crypto::NoiseKeys keys;
    keys.static_key = config_.security.key;
    keys.remote_static = p->server_key;
    keys.psk = config_.security.psk;
    LH_ASSIGN_OR_RETURN(crypto::NoiseHandshake noise,
                        crypto::NoiseHandshake::Initiator(static_cast<crypto::NoisePattern>(mode),
                                                          keys, HelloPrologue(h), Ephemeral()));
    LH_ASSIGN_OR_RETURN(h.security.noise, noise.WriteMessage1({}));
    p->noise.emplace(std::move(noise));
  }
  for (LocalId l : p->locals) local_owner_[l] = p->cid;
  Pending& ref = *p;
  pending_[p->cid] = std::move(p);
  SendHello(ref, now);
  return ref.cid;
}

crypto::Key32 SansIoEndpoint::Ephemeral() {
  crypto::Key32 k;
  config_.security.entropy(k);
  return k;
}

absl::StatusOr<crypto::NoiseHandshake> SansIoEndpoint::ServerReadHello(
    const HandshakeMessage& m, std::optional<crypto::Key32>* client_key) {
  const SecurityMode mine = config_.security.mode();
  const auto theirs = static_cast<SecurityMode>(m.security.mode);
  if (theirs != mine) {
    ++counters_.security_mismatches;
    if (mine == SecurityMode::kPlaintext) {
      return absl::FailedPreconditionError(
          "this server runs without packet protection (insecure); the client asked for it");
    }
    if (theirs == SecurityMode::kPlaintext) {
      return absl::FailedPreconditionError(
          "this server requires packet protection; the client connected without keys "
          "(insecure)");
    }
    return absl::FailedPreconditionError(absl::StrCat("this server authenticates with ",
                                                      SecurityModeName(mine),
                                                      "; the client offered ",
                                                      SecurityModeName(theirs)));
  }
  crypto::NoiseKeys keys;
  keys.static_key = config_.security.key;
  keys.psk = config_.security.psk;
  LH_ASSIGN_OR_RETURN(crypto::NoiseHandshake noise,
                      crypto::NoiseHandshake::Responder(static_cast<crypto::NoisePattern>(mine),
                                                        keys, HelloPrologue(m), Ephemeral()));
  if (absl::StatusOr<std::vector<uint8_t>> payload = noise.ReadMessage1(m.security.noise);
      !payload.ok()) {
    ++counters_.handshake_auth_failures;
    return absl::PermissionDeniedError(
        "the handshake did not authenticate: the client holds another server key, or the "
        "pre-shared keys differ");
  }
  if (noise.remote_static()) {
    const crypto::Key32& k = *noise.remote_static();
    if (std::find(config_.security.peer_keys.begin(), config_.security.peer_keys.end(), k) ==
        config_.security.peer_keys.end()) {
      ++counters_.keys_refused;
      return absl::PermissionDeniedError(absl::StrCat(
          "this server does not allow the client key ", crypto::ToHex(k)));
    }
    *client_key = k;
  }
  return noise;
}

void SansIoEndpoint::OnHandshakePacket(Time now, LocalId local, const PeerAddress& from,
                                 std::span<const uint8_t> datagram) {
  absl::StatusOr<HandshakeMessage> m = ParseHandshakePacket(datagram);
  if (!m.ok()) {
    ++counters_.handshake_errors;
    log_.Warn("handshake-malformed", now,
              absl::StrCat("dropped a handshake packet from ", Format(from), ": ",
                           m.status().message()));
    return;
  }
  switch (m->kind) {
    case HandshakeKind::kHello:
      if (auto l = listeners_.find(local); l != listeners_.end()) {
        ServerOnHello(now, local, l->second, datagram.size(), from, *m);
      }
      return;
    case HandshakeKind::kConfirm: {
      auto it = conns_.find(m->server_cid);
      if (it != conns_.end() && it->second->meta.is_server &&
          it->second->meta.peer_id == m->client_cid) {
        Conn& c = *it->second;
        if (c.protector && !c.protector->VerifyConfirmProof(m->security.noise)) {
          ++counters_.confirms_refused;  // a replayed or forged Confirm proves nothing
          return;
        }
        ConfirmServerConn(c);
      }
      return;
    }
    case HandshakeKind::kRetry:
    case HandshakeKind::kAccept:
    case HandshakeKind::kReject:
      ClientOnServerMessage(now, local, from, *m);
      return;
  }
}

// ---- server side of the handshake ----

void SansIoEndpoint::Queue(LocalId local, const PeerAddress& to, std::vector<uint8_t> bytes,
                     size_t received_bytes, bool validated) {
  if (!validated && bytes.size() > kAmplificationFactor * received_bytes) {
    ++counters_.amplification_limited;
    return;
  }
  outgoing_.push_back(Outgoing{local, to, std::move(bytes)});
}

void SansIoEndpoint::SendReject(LocalId local, const PeerAddress& to, const HandshakeMessage& hello,
                          std::string reason, size_t received, bool validated) {
  HandshakeMessage rej;
  rej.kind = HandshakeKind::kReject;
  rej.version = kProtocolVersion;
  rej.client_cid = hello.client_cid;
  rej.reason = reason.substr(0, kMaxReasonSize);
  absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(rej);
  if (!p.ok()) return;
  ++counters_.rejects_sent;
  Queue(local, to, *std::move(p), received, validated);
}

void SansIoEndpoint::SendRetry(Time now, LocalId local, const PeerAddress& to,
                         const HandshakeMessage& m, size_t received) {
  HandshakeMessage r;
  r.kind = HandshakeKind::kRetry;
  r.client_cid = m.client_cid;
  r.cookie = minter_.Mint(now, to, m.client_cid, m.version);
  absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(r);
  if (!p.ok()) return;
  ++counters_.retries_sent;
  Queue(local, to, *std::move(p), received, /*validated=*/false);
}

void SansIoEndpoint::ServerOnHello(Time now, LocalId local, const Listener& listener,
                             size_t received, const PeerAddress& from,
                             const HandshakeMessage& m) {
  ++counters_.hellos_received;
  if (received < kMinInitialSize) {
    ++counters_.short_initials;
    log_.Warn("short-initial", now,
              absl::StrCat("dropped a Hello of ", received, " bytes from ", Format(from),
                           " (Initial datagrams must be at least ", kMinInitialSize,
                           " bytes)"));
    return;
  }
  if (m.version != kProtocolVersion) {
    ++counters_.version_mismatches;
    std::string reason =
        absl::StrCat("version mismatch: the server speaks longhaul protocol version ",
                     kProtocolVersion, ", the client asked for ", m.version);
    log_.Warn("version", now, absl::StrCat("client ", Format(from), ": ", reason));
    SendReject(local, from, m, reason, received, /*validated=*/false);
    return;
  }
  if (m.cookie.empty()) {
    SendRetry(now, local, from, m, received);
    return;
  }
  switch (minter_.Check(now, m.cookie, from, m.client_cid, m.version)) {
    case CookieVerdict::kInvalid:
      ++counters_.cookies_invalid;
      log_.Warn("cookie", now,
                absl::StrCat("dropped a Hello from ", Format(from),
                             " with an invalid (forged or corrupted) cookie"));
      return;
    case CookieVerdict::kExpired:
      ++counters_.cookies_expired;
      SendRetry(now, local, from, m, received);
      return;
    case CookieVerdict::kValid:
      break;
  }
  // The client's address is validated from here on.
  const HelloKey key{m.client_cid, from};
  if (auto it = hello_index_.find(key); it != hello_index_.end()) {
    // A repeated Hello: our Accept was lost (or is slow); send it again.
    auto c = conns_.find(it->second);
    if (c != conns_.end()) Queue(local, from, c->second->accept_packet, received, true);
    return;
  }
  if (server_conns_ >= config_.max_connections) {
    SendReject(local, from, m,
               absl::StrCat("server busy: it already serves ", server_conns_, " connections"),
               received, true);
    return;
  }
  // The key exchange before any state: a client with the wrong key costs a Reject.
  std::optional<crypto::NoiseHandshake> noise;
  std::optional<crypto::Key32> client_key;
  const SecurityMode mode = config_.security.mode();
  if (mode != SecurityMode::kPlaintext || m.security.mode != 0) {
    absl::StatusOr<crypto::NoiseHandshake> n = ServerReadHello(m, &client_key);
    if (!n.ok()) {
      log_.Warn("handshake-auth", now,
                absl::StrCat("refused client ", Format(from), ": ", n.status().message()));
      // Keys: a generic reason on the wire (kKeysRefusedReason); a mode mismatch names
      // the modes, which are no secret (the Hello announces the client's).
      SendReject(local, from, m,
                 absl::IsPermissionDenied(n.status()) ? std::string(kKeysRefusedReason)
                                                      : std::string(n.status().message()),
                 received, true);
      return;
    }
    noise.emplace(*std::move(n));
  }
  absl::StatusOr<TransportConfig> negotiated =
      NegotiateServerConfig(listener.config.config, listener.config.policy, m.params,
                            config_.max_flows, [&] {
                              HelloInfo info;
                              info.peer_address = Format(from);
                              info.segment = m.params.segment;
                              info.recv_window = m.params.recv_window;
                              info.max_inflight_messages = m.params.max_inflight_messages;
                              info.flows = m.params.flows;
                              info.idle_timeout =
                                  Duration::Milliseconds(m.params.idle_timeout_ms);
                              info.app_data = m.app_data;
                              return info;
                            });
  if (!negotiated.ok()) {
    SendReject(local, from, m, std::string(negotiated.status().message()), received, true);
    return;
  }
  const TransportConfig& config = *negotiated;
  const crypto::Cipher cipher = ChooseCipher(m.security.ciphers, LocalCipherMask());
  auto c = std::make_unique<Conn>();
  c->meta.id = NewCid(/*client=*/false);
  c->meta.peer_id = m.client_cid;
  c->meta.is_server = true;
  c->meta.security = mode;
  c->meta.cipher = cipher;
  c->meta.peer_static_key = client_key;
  c->meta.listener = local;
  c->meta.peer = from;
  c->meta.locals = {local};
  c->meta.peer_app_data = m.app_data;
  c->paths.assign(config.flows, PeerPath(from));
  longhaul::ConnectionIds ids;
  ids.local = c->meta.id;
  ids.peer = c->meta.peer_id;
  ids.peer_recv_window = m.params.recv_window;
  ids.sealed = noise.has_value();
  c->conn = std::make_unique<Connection>(SealedConfig(config, ids.sealed), ids, rng_.Next(), now);
  HandshakeMessage acc;
  acc.kind = HandshakeKind::kAccept;
  acc.client_cid = m.client_cid;
  acc.server_cid = c->meta.id;
  acc.params = ParamsFor(config);
  if (noise) {
    acc.security.mode = static_cast<uint8_t>(mode);
    acc.security.ciphers = static_cast<uint8_t>(cipher);
    noise->MixContext(AcceptContext(acc));
    absl::StatusOr<std::vector<uint8_t>> msg2 = noise->WriteMessage2({});
    if (!msg2.ok()) return;
    acc.security.noise = *std::move(msg2);
    absl::StatusOr<std::unique_ptr<crypto::PacketProtector>> prot = crypto::PacketProtector::Create(
        cipher, noise->Split(), /*initiator=*/false, config_.security.key_update, now);
    if (!prot.ok()) return;
    c->protector = *std::move(prot);
  }
  absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(acc);
  if (!pkt.ok()) return;
  c->accept_packet = *std::move(pkt);
  c->confirmed = false;
  c->confirm_deadline = now + config_.cookie_lifetime;
  c->accept_backoff = kFirstAcceptBackoff;
  c->next_accept_resend = now + c->accept_backoff;
  RefreshDeadline(*c);
  Conn& ref = *c;
  c->reported = false;  // the driver hears of it once the client confirms
  hello_index_[key] = ref.meta.id;
  conns_[ref.meta.id] = std::move(c);
  ++server_conns_;
  Queue(local, from, ref.accept_packet, received, true);
}

void SansIoEndpoint::ConfirmServerConn(Conn& c) {
  if (c.confirmed) return;
  c.confirmed = true;
  c.next_accept_resend = Time::Infinite();
  c.confirm_deadline = Time::Infinite();
  c.reported = true;
  ++counters_.connections_accepted;
  EndpointEvent e;
  e.type = EndpointEvent::Type::kIncoming;
  e.id = c.meta.id;
  events_.push_back(std::move(e));
  // A state that came in the packets before the confirmation is reported now.
  ReportDriverState(c);
}

void SansIoEndpoint::DropUnconfirmed(ConnectionId id) {
  auto it = conns_.find(id);
  if (it == conns_.end() || it->second->reported) return;
  const Conn& c = *it->second;
  hello_index_.erase(HelloKey{c.meta.peer_id, c.meta.peer});
  --server_conns_;
  ++counters_.unconfirmed_expired;
  conns_.erase(it);
}

// ---- client side of the handshake ----

void SansIoEndpoint::SendHello(Pending& p, Time now) {
  p.hello_sent = now;
  p.hello_repeated = false;
  HandshakeMessage h = p.hello_message;
  h.cookie = p.cookie;
  absl::StatusOr<std::vector<uint8_t>> pkt = BuildHandshakePacket(h);
  if (!pkt.ok()) {
    FailPending(p.cid, pkt.status());
    return;
  }
  p.hello = *std::move(pkt);
  Queue(p.locals[0], p.server, p.hello, 0, /*validated=*/true);
}

void SansIoEndpoint::FailPending(ConnectionId id, absl::Status error) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  for (LocalId l : p->locals) local_owner_.erase(l);
  EndpointEvent e;
  e.type = EndpointEvent::Type::kConnectFailed;
  e.id = id;
  e.status = std::move(error);
  e.locals = std::move(p->locals);
  events_.push_back(std::move(e));
}

void SansIoEndpoint::ClientOnServerMessage(Time now, LocalId local, const PeerAddress& from,
                                     const HandshakeMessage& m) {
  auto it = pending_.find(m.client_cid);
  if (it == pending_.end()) {
    // A repeated Accept for an established connection: our Confirm was lost.
    auto c = conns_.find(m.client_cid);
    if (m.kind == HandshakeKind::kAccept && c != conns_.end() && !c->second->meta.is_server &&
        c->second->meta.peer_id == m.server_cid && c->second->meta.peer == from) {
      SendConfirm(*c->second);
    }
    return;
  }
  Pending& p = *it->second;
  auto owner = local_owner_.find(local);
  if (owner == local_owner_.end() || owner->second != p.cid) return;  // not where we sent
  if (!(from == p.server)) {
    // Only the server this client contacted may answer its Hello: a Retry, Reject or
    // Accept from anywhere else (someone who saw the Hello) is counted and ignored.
    ++counters_.handshake_wrong_source;
    log_.Warn("handshake-source", now,
              absl::StrCat("ignored a handshake reply from ", Format(from),
                           " to a Hello sent to ", Format(p.server)));
    return;
  }
  const std::string server = Format(p.server);
  if (m.version != p.version) {
    FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                           "version mismatch: server ", server,
                           " speaks longhaul protocol version ", m.version,
                           ", this client speaks ", p.version)));
    return;
  }
  switch (m.kind) {
    case HandshakeKind::kRetry:
      p.heard = true;
      if (++p.retries > kMaxRetries) {
        FailPending(p.cid, absl::UnavailableError(absl::StrCat(
                               "server ", server, " kept answering with Retry (", kMaxRetries,
                               " times); giving up")));
        return;
      }
      p.cookie = m.cookie;
      p.next_resend = now + p.backoff;
      SendHello(p, now);
      return;
    case HandshakeKind::kReject: {
      // The reason comes from the network: escaped, so it cannot forge log lines.
      std::string reason = PrintableText(m.reason);
      if (m.reason == kKeysRefusedReason) {
        absl::StrAppend(&reason, " (this client holds another server key, a pre-shared key "
                                 "that differs, or a key the server does not allow; the "
                                 "server's log says which)");
      }
      FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                             "server ", server, " rejected the connection: ", reason)));
      return;
    }
    case HandshakeKind::kAccept:
      ClientEstablish(now, p, m);
      return;
    default:
      return;
  }
}

void SansIoEndpoint::ClientEstablish(Time now, Pending& p, const HandshakeMessage& m) {
  // A protected attempt believes nothing of an Accept before it authenticates (its
  // parameters, mode and cipher are bound into the proof): anyone who saw the Hello can
  // send one. One that does not authenticate is ignored, on a copy of the handshake
  // state, so the server's own Accept still completes it; only the deadline ends the
  // attempt.
  std::optional<crypto::NoiseHandshake> authenticated;
  if (p.noise) {
    crypto::NoiseHandshake trial = *p.noise;
    trial.MixContext(AcceptContext(m));
    if (!trial.ReadMessage2(m.security.noise).ok()) {
      ++counters_.handshake_auth_failures;
      ++p.bad_accepts;
      p.heard = true;
      return;
    }
    authenticated.emplace(std::move(trial));
  }
  absl::StatusOr<TransportConfig> negotiated = ApplyServerParams(p.config.config, m.params);
  if (!negotiated.ok()) {
    FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                           "server ", Format(p.server),
                           " negotiated parameters this client cannot use: ",
                           negotiated.status().message())));
    return;
  }
  TransportConfig& config = *negotiated;
  // The Hello's round trip, where it was sent once (else which copy was answered is
  // unknown): the connection starts from the path's RTT instead of initial_rtt, for its
  // loss timers and its congestion controller's first window (initial_rate x RTT).
  if (!p.hello_repeated && now > p.hello_sent) {
    config.initial_rtt = std::min(now - p.hello_sent, Duration::Seconds(60));
  }
  std::unique_ptr<crypto::PacketProtector> protector;
  if (p.noise) {
    if (m.security.mode != p.hello_message.security.mode) {
      FailPending(p.cid, absl::PermissionDeniedError(absl::StrCat(
                             "server ", Format(p.server),
                             " accepted without the packet protection this client requires")));
      return;
    }
    if (m.security.ciphers != static_cast<uint8_t>(crypto::Cipher::kAes256Gcm) &&
        m.security.ciphers != static_cast<uint8_t>(crypto::Cipher::kChaCha20Poly1305)) {
      FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                             "server ", Format(p.server), " chose an unknown cipher ",
                             m.security.ciphers)));
      return;
    }
    *p.noise = *std::move(authenticated);
    absl::StatusOr<std::unique_ptr<crypto::PacketProtector>> prot = crypto::PacketProtector::Create(
        static_cast<crypto::Cipher>(m.security.ciphers), p.noise->Split(), /*initiator=*/true,
        config_.security.key_update, now);
    if (!prot.ok()) {
      FailPending(p.cid, prot.status());
      return;
    }
    protector = *std::move(prot);
  } else if (m.security.mode != 0) {
    FailPending(p.cid, absl::FailedPreconditionError(absl::StrCat(
                           "server ", Format(p.server),
                           " answered with packet protection this client did not ask for")));
    return;
  }
  std::unique_ptr<Pending> owned = std::move(pending_[p.cid]);
  pending_.erase(owned->cid);
  auto c = std::make_unique<Conn>();
  c->meta.id = owned->cid;
  c->meta.peer_id = m.server_cid;
  c->meta.is_server = false;
  c->meta.peer = owned->server;
  c->meta.peer_app_data = m.app_data;
  c->meta.security = static_cast<SecurityMode>(owned->hello_message.security.mode);
  if (protector) c->meta.cipher = protector->cipher();
  c->meta.peer_static_key = owned->server_key;
  c->protector = std::move(protector);
  EndpointEvent e;
  e.type = EndpointEvent::Type::kConnected;
  e.id = owned->cid;
  // Locals beyond the negotiated flow count are not needed.
  while (owned->locals.size() > config.flows) {
    local_owner_.erase(owned->locals.back());
    e.locals.push_back(owned->locals.back());
    owned->locals.pop_back();
  }
  c->meta.locals = owned->locals;
  longhaul::ConnectionIds ids;
  ids.local = c->meta.id;
  ids.peer = c->meta.peer_id;
  ids.peer_recv_window = m.params.recv_window;
  ids.sealed = c->protector != nullptr;
  c->conn = std::make_unique<Connection>(SealedConfig(config, ids.sealed), ids, rng_.Next(), now);
  RefreshDeadline(*c);
  Conn& ref = *c;
  conns_[ref.meta.id] = std::move(c);
  SendConfirm(ref);
  events_.push_back(std::move(e));
}

void SansIoEndpoint::SendConfirm(const Conn& c) {
  HandshakeMessage m;
  m.kind = HandshakeKind::kConfirm;
  m.client_cid = c.meta.id;
  m.server_cid = c.meta.peer_id;
  if (c.protector) {
    m.security.mode = static_cast<uint8_t>(c.meta.security);
    const std::array<uint8_t, 16> proof = c.protector->ConfirmProof();
    m.security.noise.assign(proof.begin(), proof.end());
  }
  absl::StatusOr<std::vector<uint8_t>> p = BuildHandshakePacket(m);
  if (!p.ok()) return;
  Queue(c.meta.locals[0], c.meta.peer, *std::move(p), 0, true);
}

void SansIoEndpoint::RunHandshakeTimers(Time now) {
  std::vector<ConnectionId> expired;
  for (auto& [cid, p] : pending_) {
    if (now >= p->deadline) {
      expired.push_back(cid);
    } else if (now >= p->next_resend) {
      p->backoff = std::min(p->backoff * 2, kMaxHandshakeBackoff);
      p->next_resend = now + p->backoff;
      p->hello_repeated = true;
      Queue(p->locals[0], p->server, p->hello, 0, true);
    }
  }
  // Fail in id order so that the events do not depend on hash-map order.
  std::sort(expired.begin(), expired.end());
  for (ConnectionId cid : expired) {
    Pending& p = *pending_[cid];
    if (p.bad_accepts > 0) {
      FailPending(cid, absl::PermissionDeniedError(absl::StrCat(
                           "server ", Format(p.server), " did not authenticate: ",
                           p.bad_accepts, " Accept(s) within ", FormatDuration(p.config.timeout),
                           " did not prove the server's key (it is not the one this client "
                           "was given, or the pre-shared keys differ, or they were forged)")));
      continue;
    }
    const std::string what =
        p.heard ? absl::StrCat("server ", Format(p.server),
                               " answered but did not accept the connection within ",
                               FormatDuration(p.config.timeout))
                : absl::StrCat("no answer from ", Format(p.server), " within ",
                               FormatDuration(p.config.timeout),
                               " (is a longhaul server listening there?)");
    FailPending(cid, absl::DeadlineExceededError(what));
  }
  std::vector<ConnectionId> unconfirmed;
  for (auto& [cid, c] : conns_) {
    if (c->confirmed) continue;
    if (now >= c->confirm_deadline) {
      unconfirmed.push_back(cid);
    } else if (now >= c->next_accept_resend) {
      c->accept_backoff = std::min(c->accept_backoff * 2, kMaxHandshakeBackoff);
      c->next_accept_resend = now + c->accept_backoff;
      Queue(c->meta.listener, c->meta.peer, c->accept_packet, 0, true);
    }
  }
  // In id order, so that the log does not depend on hash-map order.
  std::sort(unconfirmed.begin(), unconfirmed.end());
  for (ConnectionId cid : unconfirmed) {
    log_.Warn("unconfirmed", now,
              absl::StrCat("dropped an unconfirmed connection from ", Format(conns_[cid]->meta.peer),
                           ": the client did not confirm it within ",
                           FormatDuration(config_.cookie_lifetime),
                           " (a replayed Hello, a client that gave up, or every packet after "
                           "the Accept lost)"));
    DropUnconfirmed(cid);
  }
}

ConnectionId SansIoEndpoint::NewCid(bool client, std::optional<uint16_t> tag) {
  const bool tag_client = client && (tag.has_value() || static_cast<bool>(config_.client_id_tag));
  const uint64_t client_tag = !tag_client ? 0 : tag ? *tag : config_.client_id_tag();
  while (true) {
    uint64_t cid;
    if (config_.id_entropy) {
      uint8_t b[8];
      config_.id_entropy(b);
      std::memcpy(&cid, b, sizeof(cid));
    } else {
      cid = rng_.Next();
    }
    constexpr uint64_t kTopByte = uint64_t{0xFF} << 56;
    if (tag_client) {
      constexpr uint64_t kTop16 = uint64_t{0xFFFF} << 48;
      cid = (cid & ~kTop16) | (client_tag << 48);
    } else if (!client && config_.engine_count > 1) {
      cid = (cid & ~kTopByte) | (uint64_t{config_.engine} << 56);
    }
    if (cid != 0 && !conns_.contains(cid) && !pending_.contains(cid)) return cid;
  }
}

}  // namespace longhaul::endpoint
