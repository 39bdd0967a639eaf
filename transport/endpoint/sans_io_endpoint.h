// endpoint::SansIoEndpoint: the sans-IO endpoint, the layer between the drivers (UDP,
// verbs, a simulator) and the protocol core (Connection). It owns every Connection of one
// driver and everything about them that is not the connection protocol itself:
//   - the handshake on both sides (Hello, stateless cookie Retry, Accept, Confirm,
//     Reject; version and parameter negotiation; retransmission with backoff; timeouts),
//   - routing by connection id (not by address: a connection's flows may come from
//     several source ports) and learning each flow's peer address,
//   - the 3x amplification limit before a client's address is validated,
//   - what happens to garbage, stray and foreign datagrams (counted, logged at a bounded
//     rate, never delivered),
//   - ICMP-style "peer unreachable" reports from the driver.
// Like the core it never reads a clock, sleeps, starts threads or touches a socket: every
// entry point takes `now`, randomness comes from the configured seed, and the same
// inputs in the same order give the same outputs (unit tests and the simulator drive it
// in virtual time; docs/endpoint.md).
//
// Driver contract (one thread calls everything; nothing here is thread-safe):
//   - Listen(local, ...) for each listening port; Connect(now, server, locals, ...) for a
//     client, with one local per flow (flow 0 first).
//   - OnDatagram(now, local, from, bytes, ecn) for every received datagram; a kForeign
//     verdict hands a listening port's non-longhaul datagram back to the driver.
//   - PollTransmit(now, ...) until it returns 0, sending each datagram from `local` to `to`.
//   - NextTimeout(now): the one deadline to wake at (then PollTransmit again).
//   - PollEvent() for connection events; ConnectionAt() to reach a Connection's
//     application side; Touch() after changing it; Release() once its kClosed event was
//     consumed.
//   - The driver-state channel (a verbs driver's RDMA set-up): SetDriverState or
//     SetDatagramLimit on ConnectionAt(id), then Touch(id); on a kDriverState event,
//     ConnectionAt(id)->TakePeerDriverState.
//   - SetBlocked(local) while a local cannot take datagrams (socket buffer full).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/connection.h"
#include "transport/crypto/packet_protection.h"
#include "transport/endpoint/handshake.h"
#include "transport/endpoint/negotiation.h"
#include "transport/endpoint/peer_address.h"
#include "transport/endpoint/security_config.h"
#include "transport/base/rate_limited_log.h"

namespace longhaul::endpoint {

using AddressFormatter = std::function<std::string(const PeerAddress&)>;

struct EndpointConfig {
  // How long a stateless cookie stays valid (at least 1 s); also how long a server
  // waits for the client's Confirm.
  Duration cookie_lifetime = Duration::Seconds(10);
  uint32_t max_connections = 1024;  // server-side connections kept at once
  uint32_t max_flows = 64;          // flows accepted per connection
  // The connections' randomness (and connection ids without `id_entropy`). The driver
  // draws one at the edge when its user asks for none.
  uint64_t seed = 1;
  // Where connection ids come from: unset, the seeded generator (deterministic: the
  // simulator and tests); drivers give the system's randomness, so that ids seen on the
  // wire say nothing about the next ones.
  EntropySource id_entropy;
  // Engines (a driver running several endpoints on one port): with engine_count > 1,
  // the top byte of every connection id this endpoint chooses is `engine`, the byte the
  // port's steering program reads (wire bytes 4: the id is big-endian on the wire).
  uint32_t engine = 0;
  uint32_t engine_count = 1;
  // Optional: the top 16 bits of each client connection's id (the driver keeps a
  // counter, shared by an endpoint's engines). A server with several engines sends a
  // Hello to engine (those bits % engines), so one client's consecutive connections
  // spread evenly over them. Unset: client ids are random in every bit.
  std::function<uint16_t()> client_id_tag;
  // Key of the cookie MAC; drivers draw it from an entropy source at the edge.
  SipKey cookie_secret;
  // Prints a peer address in errors and logs ("198.18.0.1:40001"); hex bytes if unset.
  AddressFormatter format_address;
  // How long a client's connection survives "peer unreachable" reports (ICMP port
  // unreachable) with no valid packet from the peer before it closes.
  Duration unreachable_grace = Duration::Seconds(1);
  // Packet protection (keys, or an explicit choice of plaintext); must Validate().
  SecurityConfig security;
  // Bytes a connection's paced sends are batched into for NextWake (0: none).
  ByteCount send_quantum = 0;
  // Errors: InvalidArgument naming the field.
  absl::Status Validate() const;
};

struct ListenConfig {
  TransportConfig config;  // for accepted connections (unless the policy says otherwise)
  HelloPolicy policy;      // optional
  // Datagrams whose first byte is not the protocol version are returned to the driver
  // (kForeign) instead of being dropped as undecodable.
  bool foreign_datagrams = false;
};

struct ConnectConfig {
  TransportConfig config;
  std::string app_data;  // opaque bytes for the server's HelloPolicy (at most 900)
  // The top 16 bits of this connection's id, instead of EndpointConfig::client_id_tag's
  // next (a server with several engines steers the Hello by them).
  std::optional<uint16_t> id_tag;
  // Total time for the handshake (Hello retransmitted with backoff meanwhile).
  Duration timeout = Duration::Seconds(5);
  // Protocol version to ask for. Tests only: anything but the default is refused.
  uint32_t protocol_version = 0;  // 0: this build's version
  // With static keys: the server's public key for this connection; unset, the endpoint's
  // SecurityConfig must hold exactly one peer key.
  std::optional<crypto::Key32> server_key;
};

// The local connection id (also the token Connect() returns).
using ConnectionId = uint64_t;

// A datagram PollTransmit produced: send `size` bytes from `local` to `to` (a driver
// whose local is bound to one peer may ignore `to`).
struct Transmit {
  LocalId local = kNoLocal;
  PeerAddress to;
  ConnectionId connection = 0;  // whose packet (0: a handshake datagram)
  Ecn ecn = Ecn::kNotEct;
  size_t size = 0;
  // Zero copy (Connection::SetPayloadByReference, plaintext): payloads the datagram
  // leaves out: `length` bytes from `source` (memory of `region`) belong at `offset`.
  // The bytes there are undefined: the driver sends them from the source (a gather
  // list) or copies them in before the datagram leaves. Its CRC32C covers them.
  uint32_t payload_count = 0;
  std::array<wire::DeferredPayload, wire::kMaxDeferredPayloads> payloads{};
  std::span<const wire::DeferredPayload> referenced() const {
    return std::span<const wire::DeferredPayload>(payloads.data(), payload_count);
  }
};

struct EndpointEvent {
  enum class Type {
    // Client: the handshake completed; the connection exists (ConnectionAt(id)).
    // `locals` lists the ones beyond the negotiated flow count, the driver's to close.
    kConnected,
    // Client: the handshake failed (status names the server and the cause); nothing of
    // it remains. `locals` are the ones Connect() was given, the driver's to close.
    kConnectFailed,
    // Server: a client confirmed a connection (its Confirm, or its first authenticated
    // 1-RTT packet when the Confirm was lost): with keys, it has proved them. Until then
    // the connection is the endpoint's alone (a replayed Hello and cookie get an Accept
    // but never reach the driver); one that is not confirmed within the cookie lifetime
    // is dropped silently (`unconfirmed_expired`).
    kIncoming,
    // A connection the driver was told of (kConnected, kIncoming; for a server connection
    // confirmed by a packet that carried a state, right after its kIncoming) has a new
    // state from the peer's driver: ConnectionAt(id)->TakePeerDriverState takes it. One
    // event until the driver takes it, however many newer states arrive meanwhile (the
    // connection keeps the newest).
    kDriverState,
  };
  Type type = Type::kConnected;
  ConnectionId id = 0;
  absl::Status status;          // kConnectFailed
  std::vector<LocalId> locals;  // kConnectFailed, kConnected: locals no longer used
};

// Facts about a connection fixed at its handshake.
struct ConnectionMeta {
  ConnectionId id = 0;    // our connection id (peers put it in their packets)
  uint64_t peer_id = 0;   // the peer's
  bool is_server = false;
  LocalId listener = kNoLocal;  // server: the listening local it arrived on
  PeerAddress peer;             // the handshake's peer address
  std::vector<LocalId> locals;  // client: one per flow; server: the listener
  std::string peer_app_data;
  SecurityMode security = SecurityMode::kPlaintext;
  crypto::Cipher cipher = crypto::Cipher::kAes256Gcm;  // when protected
  std::optional<crypto::Key32> peer_static_key;        // the peer's, with static keys
};

// Protocol counters (since creation).
struct EndpointCounters {
  uint64_t undecodable = 0;         // not a longhaul datagram (bad length, version or type)
  uint64_t unknown_connection = 0;  // 1-RTT packets for no connection of ours
  uint64_t foreign_datagrams = 0;   // returned to the driver (kForeign)
  uint64_t hellos_received = 0;
  uint64_t short_initials = 0;  // Initials below kMinInitialSize bytes (dropped)
  uint64_t retries_sent = 0;
  uint64_t cookies_invalid = 0;  // forged or corrupted cookies (dropped)
  uint64_t cookies_expired = 0;  // answered with a fresh Retry
  uint64_t version_mismatches = 0;
  uint64_t rejects_sent = 0;
  uint64_t connections_accepted = 0;  // confirmed incoming connections (kIncoming)
  // Server connections whose client never confirmed them within the cookie lifetime
  // (a replayed Hello, a client that gave up, a Confirm and every later packet lost).
  uint64_t unconfirmed_expired = 0;
  uint64_t handshake_errors = 0;       // malformed handshake packets
  // Retry, Reject or Accept from an address other than the server the Hello went to
  // (ignored).
  uint64_t handshake_wrong_source = 0;
  uint64_t amplification_limited = 0;  // replies withheld by the 3x limit
  // A client flow's address changed (docs/endpoint.md, "Address changes"): moves to a new
  // (unvalidated) address, proofs of one (an ACK of a packet sent there), returns to the
  // validated address, transmit rounds a connection sat out because an unvalidated
  // address had no budget left, and datagrams sent beyond the budget as probes.
  uint64_t path_changes = 0;
  uint64_t paths_validated = 0;
  uint64_t path_returns = 0;
  uint64_t path_limited = 0;
  uint64_t path_probes = 0;
  // Times a connection's deadline had passed but it produced nothing; it is then
  // re-polled after kStalledDeadlineWait (a diagnostic for the core).
  uint64_t stalled_deadlines = 0;
  // packet protection
  uint64_t handshake_auth_failures = 0;  // key exchanges that did not authenticate
  uint64_t security_mismatches = 0;      // a peer of another mode (keys vs plaintext)
  uint64_t keys_refused = 0;             // a client static key the server does not allow
  uint64_t packets_unauthenticated = 0;  // sealed packets that did not open (tampered, forged)
  uint64_t packets_replayed = 0;         // a packet number already received
  uint64_t packets_too_old = 0;          // below the replay window
  uint64_t plaintext_refused = 0;        // unsealed 1-RTT packets for a protected connection
  uint64_t confirms_refused = 0;         // Confirms whose key proof did not verify
  uint64_t payloads_opened_in_place = 0;  // DATA payloads decrypted into their buffers
  // Of the packets that did not authenticate, those whose payload had been decrypted into
  // a range of its buffer not received yet (it is neither counted nor delivered there,
  // and the genuine packet writes it again).
  uint64_t in_place_auth_failures = 0;
};

class SansIoEndpoint {
 public:
  enum class Verdict { kHandled, kForeign };
  static constexpr Duration kStalledDeadlineWait = Duration::Microseconds(200);
  // While a connection's local is blocked its deadline is rechecked this often.
  static constexpr Duration kBlockedRecheck = Duration::Milliseconds(1);

  // `config` must Validate() (CHECKed).
  explicit SansIoEndpoint(EndpointConfig config);
  ~SansIoEndpoint();
  SansIoEndpoint(const SansIoEndpoint&) = delete;
  SansIoEndpoint& operator=(const SansIoEndpoint&) = delete;

  // `local` accepts Hellos from now on. Errors: InvalidArgument for a bad config or
  // local, AlreadyExists when it listens already.
  absl::Status Listen(LocalId local, ListenConfig config);

  // Starts a client handshake with `server` from `locals` (one per flow asked for; flow 0
  // carries the handshake; each local belongs to this connection alone). Returns the
  // connection's id; the outcome is a kConnected or kConnectFailed event. Errors (nothing
  // kept): InvalidArgument for a bad config, too much app data, or no locals;
  // AlreadyExists for a local in use.
  absl::StatusOr<ConnectionId> Connect(Time now, const PeerAddress& server,
                                       std::vector<LocalId> locals, ConnectConfig config);

  // A datagram received on `local` from `from`. kForeign: not longhaul's, and `local`
  // listens with foreign_datagrams (the driver handles it); everything else is handled
  // here (delivered, answered, or dropped and counted).
  Verdict OnDatagram(Time now, LocalId local, const PeerAddress& from,
                     std::span<const uint8_t> datagram, Ecn ecn = Ecn::kNotEct);
  // A datagram of an established plaintext connection whose DATA payload the datapath
  // wrote elsewhere (receive-side placement, docs/rdma.md 7.15;
  // Connection::OnPlacedDatagram): the payload's `length` bytes belong at `payload_offset`
  // in `datagram` and are at `payload`. kRefused, counted, when it is not such a datagram
  // (a handshake packet, an unknown or sealed connection) or its checksum fails.
  Connection::Placed OnPlacedDatagram(Time now, LocalId local, const PeerAddress& from,
                                      std::span<uint8_t> datagram, size_t payload_offset,
                                      const uint8_t* payload, size_t length);

  // The driver saw an error on `local`: Unavailable (ICMP port unreachable) fails a
  // pending handshake from it at once ("connection refused"), and closes an established
  // client connection after unreachable_grace without a valid packet. Other errors fail
  // pending handshakes; on listeners they are only logged.
  void OnLocalError(Time now, LocalId local, const absl::Status& error);

  // A local that cannot take datagrams now: connections that send from it are not
  // polled until it is unblocked.
  void SetBlocked(LocalId local, bool blocked);
  // One connection that cannot send now (a datapath of its own is full, e.g. a UC lane
  // waiting for its receiver's window grants): it is not polled until unblocked.
  void SetConnectionBlocked(ConnectionId id, bool blocked);

  // Next datagram to send: handshake datagrams first, then the connections' packets,
  // connections whose deadline has come taking turns of up to `turn` datagrams (the
  // driver's batch divided among them; at least 4). `buffer` must hold
  // MaxDatagramSize() of every connection (64 KiB always does). Returns 0 when nothing
  // more can go at `now`.
  size_t PollTransmit(Time now, uint8_t* buffer, size_t capacity, Transmit* out,
                      size_t turn = 64);

  // The earliest time PollTransmit (or a handshake timer) has work; Infinite if none.
  Time NextTimeout(Time now) const;
  // The time a batching driver sleeps until: NextTimeout, except that a connection whose
  // next deadline is a pacing release wakes EndpointConfig::send_quantum bytes' time
  // (at its pacing rate) later, and then sends that much as one batch
  // (Connection::NextWake). Equal to NextTimeout with send_quantum 0.
  Time NextWake(Time now) const;

  bool PollEvent(EndpointEvent* event);

  // The connection with our id `id`, or null. The application side (Send, PostReceive,
  // PollEvent, Close, ...) is the caller's to use; call Touch(id) after changing it.
  Connection* ConnectionAt(ConnectionId id);
  const ConnectionMeta* MetaAt(ConnectionId id) const;
  // Refreshes the cached deadline of `id` (after application calls on it).
  void Touch(ConnectionId id);
  // Ids of every connection the driver has been told of (kConnected, kIncoming; not
  // pending handshakes nor unconfirmed server connections), in no particular order.
  void ListConnections(std::vector<ConnectionId>* out) const;
  // Forgets a closed connection (its kClosed event consumed). Returns the locals that
  // only it used (a client's flows), which the driver may close now.
  std::vector<LocalId> Release(ConnectionId id);

  // Closes every connection with `reason` (kApplication) and fails every pending
  // handshake with Cancelled; the CLOSE packets come out of PollTransmit.
  void CloseAll(Time now, const std::string& reason);

  const EndpointCounters& counters() const { return counters_; }
  // The packet-protection counters of a protected connection (null otherwise).
  const crypto::ProtectionCounters* ProtectionAt(ConnectionId id) const;
  // Every connection held, unconfirmed server ones included.
  size_t connection_count() const { return conns_.size(); }
  size_t pending_count() const { return pending_.size(); }
  const EndpointConfig& config() const { return config_; }
  std::string Format(const PeerAddress& a) const;

 private:
  struct Conn;
  struct Pending;
  struct Outgoing {
    LocalId local;
    PeerAddress to;
    std::vector<uint8_t> bytes;
  };
  struct Listener {
    ListenConfig config;
  };
  struct HelloKey {
    uint64_t cid;
    PeerAddress addr;
    bool operator==(const HelloKey& o) const { return cid == o.cid && addr == o.addr; }
    template <typename H>
    friend H AbslHashValue(H h, const HelloKey& k) {
      return H::combine(std::move(h), k.cid, k.addr);
    }
  };

  // A placed datagram's payload (OnPlacedDatagram) and what became of it.
  struct PlacedPayload {
    size_t offset = 0;
    const uint8_t* data = nullptr;
    size_t length = 0;
    Connection::Placed result = Connection::Placed::kRefused;
  };
  // `datagram` is writable when `placed` is set (OnPlacedDatagram's).
  void OnOneRtt(Time now, const wire::PacketHeader& h, const PeerAddress& from,
                std::span<const uint8_t> datagram, Ecn ecn, PlacedPayload* placed = nullptr);
  void OnHandshakePacket(Time now, LocalId local, const PeerAddress& from,
                         std::span<const uint8_t> datagram);
  void ServerOnHello(Time now, LocalId local, const Listener& listener, size_t received,
                     const PeerAddress& from, const HandshakeMessage& m);
  void ClientOnServerMessage(Time now, LocalId local, const PeerAddress& from,
                             const HandshakeMessage& m);
  void ClientEstablish(Time now, Pending& p, const HandshakeMessage& m);
  void ConfirmServerConn(Conn& c);
  // A kDriverState event for `c` if the driver was told of it, its connection has a new
  // peer state, and no event for it is out yet.
  void ReportDriverState(Conn& c);
  // Forgets a connection the driver was never told of (an unconfirmed server one).
  void DropUnconfirmed(ConnectionId id);
  void FailPending(ConnectionId id, absl::Status error);
  void SendHello(Pending& p, Time now);
  // The server side of the key exchange for a validated Hello: a PermissionDenied or
  // FailedPrecondition status is sent back in a Reject.
  absl::StatusOr<crypto::NoiseHandshake> ServerReadHello(const HandshakeMessage& m,
                                                         std::optional<crypto::Key32>* client_key);
  crypto::Key32 Ephemeral();
  void SendConfirm(const Conn& c);
  void SendRetry(Time now, LocalId local, const PeerAddress& to, const HandshakeMessage& m,
                 size_t received);
  void SendReject(LocalId local, const PeerAddress& to, const HandshakeMessage& hello,
                  std::string reason, size_t received, bool validated);
  // Queues a handshake datagram, unless the amplification limit withholds it.
  void Queue(LocalId local, const PeerAddress& to, std::vector<uint8_t> bytes,
             size_t received_bytes, bool validated);
  void RunHandshakeTimers(Time now);
  bool Blocked(const Conn& c) const;
  // A server connection with an unvalidated client address whose budget cannot take a
  // full datagram (and whose probe is not due): not polled until `*until` or new input.
  bool PathLimited(const Conn& c, Time now, Time* until = nullptr) const;
  // A valid packet of `c` from `from` on `flow`: follows an address change.
  void OnPeerPacket(Time now, Conn& c, uint16_t flow, const PeerAddress& from, size_t bytes,
                    std::span<const uint8_t> opened);
  void StartRound(Time now);
  // Opens a sealed datagram of `c` in one pass: in place, except that a DATA payload
  // bound for memory that exists already (Connection::PlaceData) is decrypted straight
  // there; on kOk with such a payload *placed_at / *placed_to say where it was and went.
  crypto::PacketProtector::OpenResult OpenIntoPlace(Time now, Conn& c, std::span<uint8_t> d,
                                                    size_t* n, const uint8_t** placed_at,
                                                    uint8_t** placed_to);
  // The cached deadlines of `c`: from its connection, or forced to `t`.
  void RefreshDeadline(Conn& c) const;
  static void ForceDeadline(Conn& c, Time t);
  Time Deadline(Time now, bool wake) const;
  void EndRound(Time now);
  // A fresh id for a connection: a client's (`client`; top 16 bits `tag` when given) or a
  // server's.
  ConnectionId NewCid(bool client, std::optional<uint16_t> tag = std::nullopt);

  const EndpointConfig config_;
  CookieMinter minter_;
  Rng rng_;
  RateLimitedLog log_;
  EndpointCounters counters_;

  absl::flat_hash_map<LocalId, Listener> listeners_;
  absl::flat_hash_map<ConnectionId, std::unique_ptr<Conn>> conns_;
  absl::flat_hash_map<ConnectionId, std::unique_ptr<Pending>> pending_;
  absl::flat_hash_map<LocalId, ConnectionId> local_owner_;  // client locals
  absl::flat_hash_map<HelloKey, ConnectionId> hello_index_;
  absl::flat_hash_set<LocalId> blocked_;
  size_t server_conns_ = 0;
  std::deque<Outgoing> outgoing_;
  std::deque<EndpointEvent> events_;

  // The transmit round in progress (connections due when it started).
  bool in_round_ = false;
  std::vector<Conn*> round_;
  std::vector<Conn*> active_;
  std::vector<Conn*> more_;
  size_t round_pos_ = 0;
  size_t turn_left_ = 0;
  size_t turn_ = 0;
};

}  // namespace longhaul::endpoint
