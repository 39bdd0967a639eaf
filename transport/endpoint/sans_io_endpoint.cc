// The endpoint keeps three kinds of state: listeners (per local), pending client
// handshakes (per connection id, until Accept/Reject/timeout) and connections (per our
// connection id). A server keeps nothing for a client until its Hello comes back with a
// valid cookie, so a flood of Hellos from spoofed addresses costs it one Retry each,
// bounded by the amplification limit, and no memory.

#include "transport/endpoint/sans_io_endpoint.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/base/parse.h"
#include "transport/base/status.h"
#include "transport/endpoint/endpoint_state.h"
#include "transport/endpoint/negotiation.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint {

std::string HexAddress(const PeerAddress& a) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(a.size() * 2);
  for (uint8_t b : a.bytes()) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s.empty() ? "(no address)" : s;
}

absl::Status EndpointConfig::Validate() const {
  if (cookie_lifetime < Duration::Seconds(1)) {
    return absl::InvalidArgumentError("cookie_lifetime must be at least 1s");
  }
  if (max_flows == 0 || max_flows > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_flows=", max_flows, " is outside [1, 65535]"));
  }
  if (unreachable_grace < Duration::Zero()) {
    return absl::InvalidArgumentError("unreachable_grace must not be negative");
  }
  if (engine_count == 0 || engine_count > 256 || engine >= engine_count) {
    return absl::InvalidArgumentError(absl::StrCat("engine ", engine, " of ", engine_count,
                                                   ": needs 0 <= engine < count <= 256"));
  }
  return security.Validate();
}


SansIoEndpoint::SansIoEndpoint(EndpointConfig config)
    : config_(std::move(config)), minter_(config_.cookie_secret, config_.cookie_lifetime) {
  const absl::Status valid = config_.Validate();
  CHECK(valid.ok()) << valid;
  rng_.Seed(config_.seed);
}

SansIoEndpoint::~SansIoEndpoint() = default;

std::string SansIoEndpoint::Format(const PeerAddress& a) const {
  return config_.format_address ? config_.format_address(a) : HexAddress(a);
}

// ---- set-up ----

absl::Status SansIoEndpoint::Listen(LocalId local, ListenConfig config) {
  if (local == kNoLocal) return absl::InvalidArgumentError("listen: local id 0 is reserved");
  LH_RETURN_IF_ERROR(config.config.Validate());
  if (listeners_.contains(local) || local_owner_.contains(local)) {
    return absl::AlreadyExistsError(absl::StrCat("listen: local ", local, " is in use"));
  }
  listeners_[local] = Listener{std::move(config)};
  return absl::OkStatus();
}

const crypto::ProtectionCounters* SansIoEndpoint::ProtectionAt(ConnectionId id) const {
  auto it = conns_.find(id);
  if (it == conns_.end() || !it->second->protector) return nullptr;
  return &it->second->protector->counters();
}

// ---- receive path ----

SansIoEndpoint::Verdict SansIoEndpoint::OnDatagram(Time now, LocalId local, const PeerAddress& from,
                                       std::span<const uint8_t> datagram, Ecn ecn) {
  if (!datagram.empty() && datagram[0] != wire::kVersion) {
    auto l = listeners_.find(local);
    if (l != listeners_.end() && l->second.config.foreign_datagrams) {
      ++counters_.foreign_datagrams;
      return Verdict::kForeign;
    }
  }
  absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(datagram);
  if (!h.ok()) {
    ++counters_.undecodable;
    if (!datagram.empty() && datagram[0] != wire::kVersion) ++counters_.version_mismatches;
    log_.Warn("undecodable", now,
              absl::StrCat("dropped a datagram from ", Format(from), " (", datagram.size(),
                           " bytes): ", h.status().message()));
    return Verdict::kHandled;
  }
  if (h->type == wire::PacketType::kOneRtt || h->type == wire::PacketType::kSealed) {
    OnOneRtt(now, *h, from, datagram, ecn);
  } else {
    OnHandshakePacket(now, local, from, datagram);
  }
  return Verdict::kHandled;
}

Connection::Placed SansIoEndpoint::OnPlacedDatagram(Time now, LocalId local,
                                                    const PeerAddress& from,
                                                    std::span<uint8_t> datagram,
                                                    size_t payload_offset,
                                                    const uint8_t* payload, size_t length) {
  (void)local;  // a placed datagram only ever belongs to an established connection
  absl::StatusOr<wire::PacketHeader> h = wire::PeekHeader(datagram);
  if (!h.ok() || h->type != wire::PacketType::kOneRtt) {
    ++counters_.undecodable;
    return Connection::Placed::kRefused;
  }
  PlacedPayload placed{payload_offset, payload, length};
  OnOneRtt(now, *h, from, datagram, Ecn::kNotEct, &placed);
  return placed.result;
}

void SansIoEndpoint::OnOneRtt(Time now, const wire::PacketHeader& h, const PeerAddress& from,
                        std::span<const uint8_t> datagram, Ecn ecn, PlacedPayload* placed) {
  auto it = conns_.find(h.connection_id);
  if (it == conns_.end()) {
    ++counters_.unknown_connection;
    return;
  }
  Conn& c = *it->second;
  const uint8_t* placed_at = nullptr;
  uint8_t* placed_to = nullptr;
  if (placed != nullptr && c.protector) {
    // Placement is for plaintext connections only: a sealed chunk is opened from its slot.
    ++counters_.undecodable;
    return;
  }
  if (c.protector) {
    if (h.type != wire::PacketType::kSealed) {
      ++counters_.plaintext_refused;
      return;
    }
    // Opened in place, but for a DATA payload that goes straight to its buffer: the
    // driver's receive buffer is ours for the duration of the call.
    std::span<uint8_t> d(const_cast<uint8_t*>(datagram.data()), datagram.size());
    size_t n = 0;
    switch (OpenIntoPlace(now, c, d, &n, &placed_at, &placed_to)) {
      case crypto::PacketProtector::OpenResult::kOk:
        break;
      case crypto::PacketProtector::OpenResult::kReplayed:
        ++counters_.packets_replayed;
        return;
      case crypto::PacketProtector::OpenResult::kTooOld:
        ++counters_.packets_too_old;
        return;
      case crypto::PacketProtector::OpenResult::kAuthFailed:
      case crypto::PacketProtector::OpenResult::kMalformed:
        ++counters_.packets_unauthenticated;
        return;
    }
    datagram = d.first(n);
  } else if (h.type == wire::PacketType::kSealed) {
    ++counters_.undecodable;  // sealed packets for a plaintext connection
    return;
  }
  // Opened size when sealed: a little under the wire size, on the safe side for the 3x budget.
  const size_t wire_bytes = datagram.size();
  // The driver takes a state between our calls: from then on a new one gets an event.
  if (!c.conn->has_new_peer_driver_state()) c.driver_state_reported = false;
  if (placed != nullptr) {
    placed->result = c.conn->OnPlacedDatagram(
        now, std::span<uint8_t>(const_cast<uint8_t*>(datagram.data()), datagram.size()), ecn,
        placed->offset, placed->data, placed->length);
  } else if (placed_to != nullptr) {
    c.conn->OnDatagram(now, datagram, ecn, placed_at, placed_to);
  } else {
    c.conn->OnDatagram(now, datagram, ecn);
  }
  const uint64_t received = c.conn->stats().packets_received;
  if (received != c.last_packets_received) {
    // A valid packet (checksum and connection id): learn the flow's address, confirm.
    c.last_packets_received = received;
    c.unreachable_since = Time::Infinite();
    if (c.meta.is_server) {
      if (h.flow < c.paths.size()) {
        OnPeerPacket(now, c, h.flow, from, wire_bytes, datagram);
      }
      if (!c.confirmed) ConfirmServerConn(c);
    }
  }
  ReportDriverState(c);
  RefreshDeadline(c);
}

void SansIoEndpoint::ReportDriverState(Conn& c) {
  if (!c.reported || c.driver_state_reported || !c.conn->has_new_peer_driver_state()) return;
  c.driver_state_reported = true;
  EndpointEvent e;
  e.type = EndpointEvent::Type::kDriverState;
  e.id = c.meta.id;
  events_.push_back(std::move(e));
}

crypto::PacketProtector::OpenResult SansIoEndpoint::OpenIntoPlace(Time now, Conn& c,
                                                            std::span<uint8_t> d, size_t* n,
                                                            const uint8_t** placed_at,
                                                            uint8_t** placed_to) {
  using crypto::PacketProtector;
  // Decrypted first, in place: the frames in front of a DATA payload (an ACK, the DATA
  // frame's header) and perhaps the payload's first bytes.
  constexpr size_t kPrefix = 128;
  PacketProtector::Opening o;
  if (PacketProtector::OpenResult r = c.protector->BeginOpen(now, d, &o);
      r != PacketProtector::OpenResult::kOk) {
    return r;
  }
  uint8_t* const body = d.data() + PacketProtector::kHeaderSize;
  uint8_t* const body_end = d.data() + d.size() - crypto::kTagSize;
  uint8_t* known = body + std::min<size_t>(kPrefix, body_end - body);
  c.protector->OpenPiece(&o, body, body, known - body);
  wire::DataFrame f;
  uint8_t* to = nullptr;
  if (body_end - known >= static_cast<ptrdiff_t>(wire::kMinPlacedPayload) &&
      wire::FindDataPayload(body, known, body_end, &f) && f.length >= wire::kMinPlacedPayload) {
    to = c.conn->PlaceData(f);
  }
  uint8_t* const at = const_cast<uint8_t*>(f.payload);
  if (to != nullptr) {
    // The payload's head came with the prefix; the rest is opened straight into place.
    const size_t head = static_cast<size_t>(known - at);
    std::memcpy(to, at, head);
    c.protector->OpenPiece(&o, to + head, known, f.length - head);
    known = at + f.length;
  }
  c.protector->OpenPiece(&o, known, known, body_end - known);
  const PacketProtector::OpenResult r = c.protector->FinishOpen(now, &o, n);
  if (to != nullptr) {
    if (r == PacketProtector::OpenResult::kOk) {
      *placed_at = at;
      *placed_to = to;
      ++counters_.payloads_opened_in_place;
    } else {
      ++counters_.in_place_auth_failures;
    }
  }
  return r;
}

void SansIoEndpoint::OnPeerPacket(Time now, Conn& c, uint16_t flow, const PeerAddress& from,
                            size_t bytes, std::span<const uint8_t> packet) {
  PeerPath& path = c.paths[flow];
  if (path.validated() && from == path.address()) return;  // the common case: nothing to do
  // The packet's acknowledgements (the proof an unvalidated address needs). The packet
  // was accepted by the connection, so it parses; only the first ranges are looked at.
  std::array<wire::AckRange, 16> ranges;
  size_t n = 0;
  absl::StatusOr<wire::PacketView> v =
      c.protector ? wire::ParseOpenedPacket(packet) : wire::ParsePacket(packet);
  if (v.ok()) {
    wire::FrameReader reader(*v);
    wire::Frame f;
    while (true) {
      absl::StatusOr<bool> more = reader.Next(&f);
      if (!more.ok() || !*more) break;
      if (f.type != wire::FrameType::kAck) continue;
      wire::AckRangeIterator it(f.ack);
      while (n < ranges.size() && it.Next(&ranges[n])) ++n;
      break;
    }
  }
  const PeerAddress old = path.address();
  switch (path.OnPacket(from, bytes, std::span<const wire::AckRange>(ranges.data(), n))) {
    case PeerPath::Change::kNone:
      break;
    case PeerPath::Change::kMoved:
      ++counters_.path_changes;
      log_.Warn("path-change", now,
                absl::StrCat("connection ", c.meta.id, " flow ", flow, ": the client moved from ",
                             Format(old), " to ", Format(from),
                             "; at most 3x what it sends goes there until it acknowledges a "
                             "packet sent there"));
      break;
    case PeerPath::Change::kReturned:
      ++counters_.path_returns;
      break;
    case PeerPath::Change::kValidated:
      ++counters_.paths_validated;
      break;
  }
  c.path_pending = false;
  for (const PeerPath& p : c.paths) c.path_pending = c.path_pending || !p.validated();
}

bool SansIoEndpoint::PathLimited(const Conn& c, Time now, Time* until) const {
  if (!c.path_pending) return false;
  const size_t full = c.conn->config().MaxDatagramSize() + wire::kSealExpansion;
  bool limited = false;
  for (const PeerPath& p : c.paths) {
    if (p.validated() || p.CanSend(now, full)) continue;
    limited = true;
    if (until != nullptr) *until = std::min(*until, p.next_probe());
  }
  return limited;
}

void SansIoEndpoint::OnLocalError(Time now, LocalId local, const absl::Status& error) {
  auto owner = local_owner_.find(local);
  if (owner == local_owner_.end()) {
    log_.Warn("local-error", now, absl::StrCat("local ", local, ": ", error.message()));
    return;
  }
  const ConnectionId cid = owner->second;
  if (pending_.contains(cid)) {
    FailPending(cid, error);
    return;
  }
  auto it = conns_.find(cid);
  if (it == conns_.end() || !absl::IsUnavailable(error)) return;
  Conn& c = *it->second;
  if (c.unreachable_since.IsInfinite()) {
    c.unreachable_since = now;
  } else if (now - c.unreachable_since >= config_.unreachable_grace && !c.conn->closed()) {
    c.conn->Close(CloseCode::kApplication, absl::StrCat("peer unreachable: ", error.message()));
    ForceDeadline(c, Time::Zero());
  }
}

// ---- transmit ----

void SansIoEndpoint::SetBlocked(LocalId local, bool blocked) {
  if (blocked) {
    blocked_.insert(local);
  } else {
    blocked_.erase(local);
  }
}

void SansIoEndpoint::SetConnectionBlocked(ConnectionId id, bool blocked) {
  auto it = conns_.find(id);
  if (it != conns_.end()) it->second->blocked = blocked;
}

bool SansIoEndpoint::Blocked(const Conn& c) const {
  if (c.blocked) return true;
  if (blocked_.empty()) return false;
  for (LocalId l : c.meta.locals) {
    if (blocked_.contains(l)) return true;
  }
  return false;
}

void SansIoEndpoint::StartRound(Time now) {
  round_.clear();
  for (auto& [cid, c] : conns_) {
    if (c->next_timeout > now || Blocked(*c)) continue;
    if (PathLimited(*c, now)) {
      ++counters_.path_limited;
      continue;
    }
    round_.push_back(c.get());
  }
  // Connection-id order: the same inputs give the same interleaving.
  std::sort(round_.begin(), round_.end(),
            [](const Conn* a, const Conn* b) { return a->meta.id < b->meta.id; });
  for (Conn* c : round_) c->conn->OnTimeout(now);
  active_ = round_;
  more_.clear();
  round_pos_ = 0;
  turn_left_ = 0;
}

void SansIoEndpoint::EndRound(Time now) {
  for (Conn* c : round_) {
    RefreshDeadline(*c);
    if (c->next_timeout <= now && !Blocked(*c) && !c->conn->closed() && !PathLimited(*c, now)) {
      // Nothing more could be sent at `now` although the deadline has passed: wait a
      // little (new input re-evaluates it at once) rather than spin on it.
      ++counters_.stalled_deadlines;
      ForceDeadline(*c, now + kStalledDeadlineWait);
    }
  }
  round_.clear();
  active_.clear();
  more_.clear();
  in_round_ = false;
}

size_t SansIoEndpoint::PollTransmit(Time now, uint8_t* buffer, size_t capacity, Transmit* out,
                              size_t turn) {
  if (!in_round_) {
    RunHandshakeTimers(now);
    StartRound(now);
    in_round_ = true;
    turn_ = std::max<size_t>(turn, 1);
  }
  if (!outgoing_.empty()) {
    Outgoing& o = outgoing_.front();
    const size_t n = o.bytes.size();
    if (n <= capacity) {
      std::memcpy(buffer, o.bytes.data(), n);
      out->local = o.local;
      out->to = o.to;
      out->connection = 0;
      out->ecn = Ecn::kNotEct;
      out->size = n;
      out->payload_count = 0;
    }
    outgoing_.pop_front();
    if (n <= capacity) return n;
    return PollTransmit(now, buffer, capacity, out, turn);
  }
  // Connections take turns: each pass gives every active connection up to `quota`
  // datagrams; those that used their whole quota go again in the next pass.
  while (!active_.empty()) {
    if (round_pos_ >= active_.size()) {
      active_.swap(more_);
      more_.clear();
      round_pos_ = 0;
      turn_left_ = 0;
      continue;
    }
    Conn* c = active_[round_pos_];
    if (turn_left_ == 0) turn_left_ = std::max<size_t>(4, turn_ / active_.size());
    if (!Blocked(*c)) {
      TransmitInfo info;
      info.fills_payload = c->protector != nullptr;  // sealed from the message into place
      const size_t n = PathLimited(*c, now) ? 0 : c->conn->PollTransmit(now, buffer, capacity, &info);
      if (n > 0) {
        PeerPath* path = nullptr;
        PacketNumber pn = 0;
        if (c->meta.is_server && !c->paths[info.flow < c->paths.size() ? info.flow : 0].validated()) {
          path = &c->paths[info.flow < c->paths.size() ? info.flow : 0];
          absl::StatusOr<wire::PacketHeader> hdr =
              wire::PeekHeader(std::span<const uint8_t>(buffer, n));
          if (hdr.ok()) pn = hdr->packet_number;
        }
        if (c->protector) {
          crypto::PlaintextPiece pieces[wire::kMaxDeferredPayloads];
          const std::span<const wire::DeferredPayload> d = info.deferred_payloads();
          for (size_t i = 0; i < d.size(); ++i) {
            pieces[i] = crypto::PlaintextPiece{d[i].offset, d[i].length, d[i].source};
          }
          c->protector->Seal(now, std::span<uint8_t>(buffer, n), c->conn->largest_acked_packet(),
                             std::span<const crypto::PlaintextPiece>(pieces, d.size()));
        }
        out->size = n;
        out->ecn = info.ecn;
        out->connection = c->meta.id;
        out->payload_count = c->protector ? 0 : info.deferred_count;
        if (out->payload_count > 0) out->payloads = info.deferred;
        if (c->meta.is_server) {
          out->local = c->meta.listener;
          out->to = c->paths[info.flow < c->paths.size() ? info.flow : 0].address();
          if (path != nullptr) {
            const uint64_t probes = path->probes();
            path->OnSent(now, out->size, pn);
            counters_.path_probes += path->probes() - probes;
          }
        } else {
          out->local = c->meta.locals[info.flow < c->meta.locals.size() ? info.flow : 0];
          out->to = c->meta.peer;
        }
        if (--turn_left_ == 0) {
          more_.push_back(c);
          ++round_pos_;
        }
        return n;
      }
    }
    ++round_pos_;
    turn_left_ = 0;
  }
  EndRound(now);
  return 0;
}

Time SansIoEndpoint::NextTimeout(Time now) const { return Deadline(now, /*wake=*/false); }

Time SansIoEndpoint::NextWake(Time now) const { return Deadline(now, /*wake=*/true); }

void SansIoEndpoint::RefreshDeadline(Conn& c) const {
  c.conn->Deadlines(config_.send_quantum, &c.next_timeout, &c.next_wake);
}

void SansIoEndpoint::ForceDeadline(Conn& c, Time t) { c.next_timeout = c.next_wake = t; }

Time SansIoEndpoint::Deadline(Time now, bool wake) const {
  if (!outgoing_.empty()) return now;
  Time next = Time::Infinite();
  for (const auto& [cid, c] : conns_) {
    Time t = wake ? c->next_wake : c->next_timeout;
    if (Blocked(*c)) t = std::max(t, now + kBlockedRecheck);
    if (Time until = Time::Infinite(); PathLimited(*c, now, &until)) t = std::max(t, until);
    next = std::min(next, t);
    if (!c->confirmed) next = std::min({next, c->next_accept_resend, c->confirm_deadline});
  }
  for (const auto& [cid, p] : pending_) next = std::min({next, p->next_resend, p->deadline});
  return next;
}

// ---- events, connections ----

bool SansIoEndpoint::PollEvent(EndpointEvent* event) {
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

Connection* SansIoEndpoint::ConnectionAt(ConnectionId id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second->conn.get();
}

const ConnectionMeta* SansIoEndpoint::MetaAt(ConnectionId id) const {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second->meta;
}

void SansIoEndpoint::Touch(ConnectionId id) {
  auto it = conns_.find(id);
  if (it != conns_.end()) RefreshDeadline(*it->second);
}

void SansIoEndpoint::ListConnections(std::vector<ConnectionId>* out) const {
  out->clear();
  for (const auto& [cid, c] : conns_) {
    if (c->reported) out->push_back(cid);
  }
}

std::vector<LocalId> SansIoEndpoint::Release(ConnectionId id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return {};
  CHECK(!in_round_) << "Release during a transmit round";
  std::unique_ptr<Conn> c = std::move(it->second);
  conns_.erase(it);
  std::vector<LocalId> freed;
  if (c->meta.is_server) {
    hello_index_.erase(HelloKey{c->meta.peer_id, c->meta.peer});
    --server_conns_;
  } else {
    for (LocalId l : c->meta.locals) {
      local_owner_.erase(l);
      blocked_.erase(l);
      freed.push_back(l);
    }
  }
  return freed;
}

void SansIoEndpoint::CloseAll(Time now, const std::string& reason) {
  std::vector<ConnectionId> pend;
  for (auto& [cid, p] : pending_) pend.push_back(cid);
  std::sort(pend.begin(), pend.end());
  for (ConnectionId cid : pend) FailPending(cid, absl::CancelledError(reason));
  for (auto& [cid, c] : conns_) {
    if (!c->reported) {
      c->confirm_deadline = Time::Zero();  // dropped at the next transmit poll
      continue;
    }
    if (!c->conn->closed()) c->conn->Close(CloseCode::kApplication, reason);
    c->confirmed = true;
    ForceDeadline(*c, Time::Zero());
  }
}

}  // namespace longhaul::endpoint

