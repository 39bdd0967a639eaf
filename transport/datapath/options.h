// Options of Endpoint (transport/api/endpoint.h) and of the drivers that implement it
// (transport/datapath/driver.h). Value types. Units are in the names or types (bytes,
// Duration).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/datapath/connection_handle.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/endpoint/negotiation.h"
#include "transport/endpoint/security_config.h"

namespace longhaul {

// ---- datapath choice (transport/api/endpoint.cc picks the driver) ----
enum class Datapath {
  kUdp,    // UDP sockets (transport/drivers/udp)
  kVerbs,  // rdma-core verbs, UD queue pairs on RoCE v2 (transport/drivers/verbs)
};
const char* DatapathName(Datapath d);
// "udp" or "verbs"; InvalidArgument naming the accepted values otherwise.
absl::StatusOr<Datapath> ParseDatapath(const std::string& name);

// How the verbs datapath moves a connection's large datagrams (docs/rdma.md section 7):
// kUd sends every datagram as a UD message (the port's MTU at most); kUc, once the peer
// offers a UC lane (a DATAPATH exchange after the handshake), writes each datagram
// larger than the UD MTU (a chunk) with RDMA WRITE WITH IMMEDIATE into the peer's
// registered ring, where the receiving NIC places it; small datagrams, and everything
// while no lane is up, stay on UD.
enum class QpType { kUd, kUc };
const char* QpTypeName(QpType t);
// "ud" or "uc"; InvalidArgument naming the choices otherwise.
absl::StatusOr<QpType> ParseQpType(const std::string& name);

// Options of the verbs datapath (docs/rdma.md). Ignored by the UDP datapath.
struct VerbsOptions {
  // RDMA device ("rxe0", "mlx5_0"); empty: the device whose RoCE v2 GID table holds the
  // local address (Listen's address, or the source address towards Connect's host).
  std::string device;
  uint8_t port = 1;  // the device's port
  // GID table index; -1: the RoCE v2 GID that carries the local IPv4 address
  // (IPv4-mapped, ::ffff:a.b.c.d).
  int gid_index = -1;
  // IP traffic class of the sent packets (DSCP << 2; the ECN bits are the NIC's).
  uint8_t traffic_class = 0;
  // true: a segment too large for the port's active MTU is reduced to fit (the default
  // 8 KiB segment becomes 4096 - headers on a 4096-byte MTU); false: it is an error.
  bool fit_segment = true;
  // Receive buffers posted per queue pair; 0 derives them from rate x initial RTT
  // (clamped to [256, the device's limit]).
  uint32_t recv_depth = 0;
  uint32_t send_depth = 512;  // send work requests in flight per queue pair
  QpType qp_type = QpType::kUd;
  // kUc: a chunk's size in bytes (the datagram the core builds; written as single-packet
  // writes of the path MTU, at most 16); 0: 16 x the active MTU (64 KiB at MTU 4096),
  // within the core's largest segment.
  uint32_t uc_chunk = 0;
  // kUc, a test mode: after every Nth chunk the sender also writes the current chunk's
  // bytes with the placement of the chunk one lap and one slot back (its old key and
  // immediate): a late duplicate into a reused buffer, which the receiver's retired
  // window must refuse (docs/rdma.md 7.4). 0: off.
  uint32_t uc_replay_every = 0;
  // kUc: lanes (UC queue pairs, each its own RoCE v2 UDP source port) per connection and
  // direction, 1 to 4; chunks are sprayed over them. Both sides use the smaller count.
  uint32_t uc_lanes = 1;
  // kUc, a test mode: after this many chunks the connection's writing QP of the lane in
  // use is forced into the error state (a QP error mid-transfer); the lane is taken out
  // and the connection goes on over its other lanes, or UD. 0: off.
  uint64_t uc_fail_lane_after = 0;
  // kUc, a test mode: after this many chunks the first lane's writer writes with a wrong
  // key, which the receiving NIC drops without a word (UC reports no remote error): a
  // lane that stalls; the sender retires it from the receiver's per-lane counts
  // (docs/rdma.md 7.6). Its replacement writes correctly. 0: off.
  uint64_t uc_stall_lane_after = 0;
};
// ---- end of the datapath choice ----

struct EndpointOptions {
  // Packet protection: keys (static key pairs and peer keys, or a pre-shared key), or an
  // explicit choice of plaintext (SecurityConfig::Insecure()). Nothing chosen is an error
  // at Create. The entropy source defaults to the system's CSPRNG. docs/security.md.
  endpoint::SecurityConfig security;
  // Socket buffers asked for (SO_RCVBUF/SO_SNDBUF, with the FORCE variants when the
  // process may); 0 derives them from the connection's window: window / 4, clamped to
  // [4 MiB, 256 MiB]. When the kernel caps them the endpoint logs, once, the sysctl that
  // raises the cap.
  ByteCount socket_buffer = 0;
  // When the next deadline (a pacing release) is this close, the driver thread polls
  // instead of sleeping on the timer: precise pacing at high rates for a busy core.
  // Zero: always sleep.
  Duration spin = Duration::Microseconds(20);
  // Paced sends are batched into this many bytes: the driver sleeps until that much is
  // due at the connection's pacing rate (at most half of its pacing_burst) and sends it
  // in one batch (one GSO send, one wake-up at the receiver) instead of waking for every
  // datagram. 0: wake at every pacing release. At most 1 MiB.
  ByteCount send_quantum = ByteCount{128} << 10;
  bool gso = true;  // UDP_SEGMENT send offload, where the kernel has it
  bool gro = true;  // UDP_GRO receive offload, where the kernel has it
  // Datagrams per sendmmsg batch and kernel messages per recvmmsg.
  uint32_t tx_batch = 64;
  uint32_t rx_batch = 32;
  // Server side: how long a stateless cookie stays valid, most connections kept (by the
  // whole endpoint: with several engines each holds max_connections / engines, rounded
  // up), and most UDP flows accepted per connection.
  Duration cookie_lifetime = Duration::Seconds(10);
  uint32_t max_connections = 1024;
  uint32_t max_flows = 64;
  // Seed for the connections' randomness; 0 draws one from the system's randomness.
  // Connection ids always come from the system's randomness (unpredictable on the wire).
  uint64_t seed = 0;
  // Which driver carries the datagrams, and the verbs driver's options.
  Datapath datapath = Datapath::kUdp;
  VerbsOptions verbs;
  // Engines: driver threads, each with its own sockets, sans-IO endpoint and timer
  // (docs/architecture.md "Engines"). A server's listening port is shared by all of them
  // (one SO_REUSEPORT group steered by connection id); a client places each connection
  // on the next engine in turn. 0: one per CPU this process may run on, at most
  // kMaxAutoEngines. At most kMaxEngines. More than 1 needs the UDP datapath.
  uint32_t engines = 1;
  // Optional: engine i runs pinned to CPU engine_cpus[i % size] (empty: not pinned).
  std::vector<int> engine_cpus;
};
inline constexpr uint32_t kMaxEngines = 64;
inline constexpr uint32_t kMaxAutoEngines = 8;

// What a server learns from a client's validated Hello, and its policy (the sans-IO
// endpoint's types: transport/endpoint/negotiation.h). The policy runs on the driver
// thread and must not block.
using HelloInfo = endpoint::HelloInfo;
using HelloPolicy = endpoint::HelloPolicy;
// Called on the driver thread as soon as an accepted connection exists, before any of
// its data is processed (the place to SetCallback or PostReceive without a race).
using AcceptCallback = std::function<void(std::shared_ptr<ConnectionHandle>)>;

// A datagram that reached a listening socket but is not longhaul's: its first byte is not
// the protocol version (wire::kVersion, 0x01). Another protocol can share the server's
// port this way; longhaul-perf's server answers the tuner's probes (first byte 0xB7).
struct ForeignDatagram {
  std::span<const uint8_t> data;  // valid during the call only
  std::string from;               // the sender, "198.18.0.1:40001" (the reply goes there)
  int64_t kernel_time_ns = 0;     // CLOCK_REALTIME kernel receive time, 0 when unknown
  int64_t now_ns = 0;             // CLOCK_REALTIME when the driver handles it
};
// Runs on the driver thread; must not block. Datagrams appended to `replies` are sent to
// the datagram's source from the listening socket, as they are: the handler is
// responsible for not amplifying (the probe responder answers with fewer bytes than it
// received, except for one report per train).
using ForeignDatagramHandler =
    std::function<void(const ForeignDatagram&, std::vector<std::vector<uint8_t>>* replies)>;

struct ListenOptions {
  TransportConfig config;  // for accepted connections (unless the policy says otherwise)
  HelloPolicy policy;      // optional
  // Optional; without it accepted connections queue for Endpoint::Accept (at most
  // `backlog`; more are rejected as busy). The backlog counts connections in the queue; a
  // connection joins it when its client confirms, so Hellos that arrive while others are
  // still confirming (on one engine, or on other engines) can pass it by as many.
  AcceptCallback on_accept;
  uint32_t backlog = 128;
  // Optional; without it such datagrams are dropped and counted as undecodable. With it
  // the socket also asks for kernel receive timestamps (SO_TIMESTAMPNS).
  ForeignDatagramHandler on_foreign_datagram;
};

struct ConnectOptions {
  TransportConfig config;
  // Opaque bytes for the server's HelloPolicy (at most 900).
  std::string app_data;
  // Total time for the handshake (Hello retransmitted with backoff meanwhile).
  Duration timeout = Duration::Seconds(5);
  // Optional completion callback, set before any event can occur.
  EventCallback callback;
  // Protocol version to ask for. Tests only: anything but the default is refused.
  uint32_t protocol_version = 0;  // 0: this build's version
  // With static keys: the server's public key for this connection (unset: the endpoint's
  // only peer key).
  std::optional<crypto::Key32> server_key;
  // Engines (EndpointOptions::engines): run the connection on engine (engine % engines)
  // and ask a server with several engines for its engine (engine % its engines): the
  // Hello is steered by it. A connection that replaces another (a reconnect, lane i of a
  // peer) keeps its place this way. -1: the next engine in turn.
  int engine = -1;
};

// Counters of an endpoint's driver (all since creation). A new counter needs its line in
// AddEndpointStats (engine_group.cc), which sums the engines'.
struct EndpointStats {
  uint64_t datagrams_sent = 0;
  uint64_t datagrams_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t send_syscalls = 0;
  uint64_t recv_syscalls = 0;
  uint64_t gso_sends = 0;     // sends that carried several datagrams (UDP_SEGMENT)
  uint64_t gro_receives = 0;  // receives that returned several datagrams (UDP_GRO)
  uint64_t send_blocked = 0;  // times a socket buffer was full
  uint64_t send_errors = 0;   // datagrams the kernel refused
  // Times a connection's NextTimeout() had passed but OnTimeout + PollTransmit produced
  // nothing; the driver then waits 200 us instead of polling (a diagnostic for the core).
  uint64_t stalled_deadlines = 0;
  uint64_t receive_truncated = 0;
  uint64_t undecodable = 0;         // not a longhaul datagram (bad length, version or type)
  uint64_t unknown_connection = 0;  // 1-RTT packets for no connection of ours
  uint64_t foreign_datagrams = 0;   // given to ListenOptions::on_foreign_datagram
  uint64_t foreign_replies = 0;     // datagrams it sent back
  // handshake (server side)
  uint64_t hellos_received = 0;
  uint64_t short_initials = 0;  // Initials below 1200 bytes (dropped)
  uint64_t retries_sent = 0;
  uint64_t cookies_invalid = 0;  // forged or corrupted cookies (dropped)
  uint64_t cookies_expired = 0;  // answered with a fresh Retry
  uint64_t version_mismatches = 0;
  uint64_t rejects_sent = 0;
  uint64_t connections_accepted = 0;
  uint64_t unconfirmed_expired = 0;
  uint64_t handshake_errors = 0;       // malformed handshake packets
  uint64_t handshake_wrong_source = 0;  // handshake replies from another address (ignored)
  uint64_t amplification_limited = 0;  // replies withheld by the 3x limit
  // packet protection (endpoint::EndpointCounters has the meanings)
  uint64_t handshake_auth_failures = 0;
  uint64_t security_mismatches = 0;
  uint64_t keys_refused = 0;
  uint64_t packets_unauthenticated = 0;
  uint64_t packets_replayed = 0;
  uint64_t packets_too_old = 0;
  uint64_t plaintext_refused = 0;
  uint64_t confirms_refused = 0;
  uint64_t payloads_opened_in_place = 0;  // decrypted straight into their buffers
  uint64_t in_place_auth_failures = 0;
  uint64_t connections_active = 0;
  // The verbs datapath's UC lanes (qp_type uc; docs/rdma.md 7.8), since creation: lanes
  // that came up (both ends connected), chunks written and received, completions ignored
  // (stale laps, duplicates), receive slots given up (chunks lost), chunks that waited for
  // a window grant, and lanes that failed (the connection went on over UD).
  uint64_t uc_lanes_opened = 0;
  uint64_t uc_chunks_sent = 0;
  uint64_t uc_chunk_bytes_sent = 0;
  uint64_t uc_chunks_received = 0;
  uint64_t uc_stale_completions = 0;
  uint64_t uc_chunks_given_up = 0;
  uint64_t uc_grant_waits = 0;
  uint64_t uc_lane_errors = 0;
  uint64_t uc_replays = 0;  // VerbsOptions::uc_replay_every's late duplicates written
  uint64_t uc_lanes_failed = 0;  // lanes taken out (their connection went on)
  uint64_t uc_lanes_replaced = 0;  // failed lanes given a new writer (docs/rdma.md 7.6)
  uint64_t uc_lanes_stalled = 0;   // of the failed: retired because the peer saw nothing
  // Chunk resizes to the loss met (docs/rdma.md 7.7): halvings and doublings.
  uint64_t uc_chunk_shrinks = 0;
  uint64_t uc_chunk_grows = 0;
  std::array<uint64_t, 4> uc_lane_chunks_sent{};  // per lane index, all connections
  // Zero copy (docs/rdma.md 7.14): DATA payload bytes the NIC gathered from the
  // application's registered memory, and payload bytes of registered messages the driver
  // copied after all (over UD, or a chunk needing more gather entries than the device
  // takes); the regions registered (Endpoint::RegisterMemory) and their bytes.
  uint64_t uc_payload_bytes_referenced = 0;
  uint64_t uc_payload_bytes_copied = 0;
  uint64_t memory_regions = 0;
  uint64_t memory_region_bytes = 0;
  // Receive-side placement (docs/rdma.md 7.15). Sending: chunks written direct (their
  // payload into the peer's advertised buffer) and their payload bytes. Receiving: posted
  // buffers advertised, revoked (their messages delivered), refused by the device; direct
  // chunks taken, their payload bytes checked where they landed (no copy) or copied
  // (their message landed elsewhere), and direct chunks dropped (checksum, or no
  // advertisement for their message any more).
  uint64_t uc_direct_chunks_sent = 0;
  uint64_t uc_direct_bytes_sent = 0;
  uint64_t uc_placements_advertised = 0;
  uint64_t uc_placements_revoked = 0;
  uint64_t uc_placement_errors = 0;
  // Advertisements withdrawn before their message completed: a window bind that failed,
  // or kMaxStrikes direct chunks for it refused (UcPlacements::Strike).
  uint64_t uc_placements_withdrawn = 0;
  // Buffers the application offered under a key (Connection::OfferReceive) that a
  // message's first direct chunk adopted.
  uint64_t uc_offers_adopted = 0;
  uint64_t uc_direct_chunks_received = 0;
  uint64_t uc_direct_bytes_in_place = 0;
  uint64_t uc_direct_bytes_copied = 0;
  uint64_t uc_direct_chunks_refused = 0;
  // Engines: how many the endpoint runs, and the CPU time their threads used (seconds,
  // user + system; per engine in Endpoint::engine_stats, summed in Endpoint::stats).
  uint32_t engines = 1;
  double cpu_s = 0;
  // socket facts (of the last socket opened)
  ByteCount recv_buffer = 0;
  ByteCount send_buffer = 0;
  bool gso = false;
  bool gro = false;
};

}  // namespace longhaul
