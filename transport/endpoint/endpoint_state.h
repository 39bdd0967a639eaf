// The endpoint's per-connection and per-handshake state, shared by endpoint.cc (routing,
// transmit, connections) and endpoint_handshake.cc (the handshake on both sides).
// Private to transport/endpoint.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "transport/core/connection.h"
#include "transport/crypto/noise.h"
#include "transport/crypto/packet_protection.h"
#include "transport/endpoint/sans_io_endpoint.h"
#include "transport/endpoint/peer_path.h"

namespace longhaul::endpoint {

struct SansIoEndpoint::Conn {
  ConnectionMeta meta;
  std::unique_ptr<Connection> conn;
  std::unique_ptr<crypto::PacketProtector> protector;  // protected connections
  // server: the client's address per flow, and its validation (amplification limit)
  std::vector<PeerPath> paths;
  bool path_pending = false;  // some flow's address is not validated
  Time next_timeout;  // conn->NextTimeout(), or a forced deadline
  Time next_wake;     // conn->NextWake(send_quantum), or the forced deadline
  // server handshake state
  bool confirmed = true;
  // The driver was told of it (kConnected, kIncoming): it is the driver's to Release.
  bool reported = true;
  bool blocked = false;  // SetConnectionBlocked
  Time confirm_deadline = Time::Infinite();
  Time next_accept_resend = Time::Infinite();
  Duration accept_backoff;
  std::vector<uint8_t> accept_packet;
  // client: "peer unreachable" reported since the last valid packet from the peer
  Time unreachable_since = Time::Infinite();
  uint64_t last_packets_received = 0;
  // A kDriverState event is out for the connection's new peer state (cleared once the
  // driver took it).
  bool driver_state_reported = false;
};

struct SansIoEndpoint::Pending {
  ConnectionId cid = 0;
  HandshakeMessage hello_message;                // what every Hello carries (cookie aside)
  std::optional<crypto::NoiseHandshake> noise;   // protected connections
  std::optional<crypto::Key32> server_key;
  PeerAddress server;
  std::vector<LocalId> locals;
  ConnectConfig config;
  std::vector<uint8_t> cookie;
  std::vector<uint8_t> hello;
  uint32_t version = kProtocolVersion;
  Time deadline;
  Time next_resend;
  Duration backoff;
  int retries = 0;
  // When the newest Hello went out, and whether it was sent again since (a timeout): an
  // Accept to a Hello sent once measures the round trip, which seeds the connection's.
  Time hello_sent;
  bool hello_repeated = false;
  bool heard = false;  // the server answered (a Retry)
  // Accepts that did not authenticate (forged, or the server holds another key): each is
  // ignored, the attempt goes on until its deadline.
  uint32_t bad_accepts = 0;
};

}  // namespace longhaul::endpoint
