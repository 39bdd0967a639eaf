// endpoint::PeerPath: a server's view of one client flow's address (docs/endpoint.md,
// "Address changes"). The handshake validated the client's first address (the cookie
// came back to it). When a valid packet of the connection arrives from another address
// (NAT rebinding, or a packet replayed from a spoofed source), the server moves the flow
// there at once, so a rebound client keeps its connection, but the new address is
// unvalidated: until a packet from it acknowledges a packet that was sent to it, the
// server sends it at most kAmplificationFactor (3) times the bytes it received from it,
// plus one probe datagram every kProbeInterval (a longhaul connection has no small
// challenge frame, so the probe is whatever packet the connection sends next; its
// acknowledgement is the proof). A packet from the last validated address moves the flow
// back there at once, keeping the candidate's budget for its return.
//
// Why an acknowledgement proves the address: with packet protection, packets cannot be
// forged, and a replayed one is refused by the replay window unless the copy wins the
// race against the original; a copy carries only acknowledgements of packets the real
// client received, at its real address. An ACK covering a packet sent only to the new
// address therefore comes from someone who received it there. Without protection an
// on-path attacker can forge anything anyway (docs/security.md).
//
// Sans-IO: times are passed in; no clock, no I/O. Not thread-safe (the endpoint's thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/base/units.h"
#include "transport/endpoint/peer_address.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint {

class PeerPath {
 public:
  static constexpr uint64_t kAmplificationFactor = 3;
  // One datagram may go to an unvalidated address this often beyond the 3x budget, so a
  // rebound client that only acknowledges (reverse transfers) can prove its address.
  static constexpr Duration kProbeInterval = Duration::Milliseconds(200);
  // Packet numbers remembered per candidate (the most recent ones sent to it).
  static constexpr size_t kTrackedPackets = 32;

  enum class Change {
    kNone,       // same address as before
    kMoved,      // to a new, unvalidated address (or back to the pending candidate)
    kReturned,   // back to the last validated address
    kValidated,  // the current address is validated now
  };

  PeerPath() = default;
  // `validated`: the address the handshake validated.
  explicit PeerPath(const PeerAddress& validated) : validated_(validated), current_(validated) {}

  // Where the flow's datagrams go.
  const PeerAddress& address() const { return current_; }
  bool validated() const { return current_ == validated_; }

  // A valid packet (authenticated or checksummed, counted by the connection) of `bytes`
  // from `from`; `acked` are the ranges of its ACK frame (empty if none). Only packets
  // from the current candidate can validate it.
  Change OnPacket(const PeerAddress& from, size_t bytes, std::span<const wire::AckRange> acked);

  // Whether a datagram of `bytes` may go to address() at `now`.
  bool CanSend(Time now, size_t bytes) const;
  // A datagram of `bytes` with packet number `pn` went to address() at `now`.
  void OnSent(Time now, size_t bytes, PacketNumber pn);
  // When the next probe may go (Time::Zero() if now; Infinite when validated).
  Time next_probe() const { return validated() ? Time::Infinite() : next_probe_; }

  // Unvalidated address accounting (zero when validated).
  uint64_t candidate_received() const { return received_; }
  uint64_t candidate_sent() const { return sent_; }
  uint64_t probes() const { return probes_; }

 private:
  bool Covers(std::span<const wire::AckRange> acked) const;

  PeerAddress validated_;
  PeerAddress current_;
  // The candidate (current_ when !validated()): bytes from it and to it, and packet
  // numbers sent to it (a ring of the most recent).
  uint64_t received_ = 0;
  uint64_t sent_ = 0;
  std::array<PacketNumber, kTrackedPackets> sent_pns_{};
  size_t sent_pn_count_ = 0;  // total recorded (ring position = count % size)
  Time next_probe_ = Time::Zero();
  uint64_t probes_ = 0;
  PeerAddress candidate_;  // the pending candidate, kept while back on validated_
};

}  // namespace longhaul::endpoint
