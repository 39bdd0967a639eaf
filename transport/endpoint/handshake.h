// The connection handshake of the sans-IO endpoint (endpoint.h): message bodies carried
// in HANDSHAKE frames of Initial / Retry / Handshake packets (transport/wire/packet.h), and
// the stateless cookie. docs/endpoint.md describes the exchange, docs/wire-format.md (section 8)
// the byte layout. Pure functions and value types; thread-safe except CookieMinter, which is
// immutable after construction and so safe to share once built.
//
//   client                                   server
//   Initial  Hello{cid_c, params, no cookie}  ->        (>= 1200 bytes, padded)
//                                             <-  Retry  Retry{cid_c, cookie}    (no state kept)
//   Initial  Hello{cid_c, params, cookie}     ->        (cookie checked, state created)
//                                             <-  Handshake  Accept{cid_c, cid_s, params}
//   Handshake Confirm{cid_c, cid_s}           ->        then both send 1-RTT packets
//
// Before a client's address is validated (cookie), the server answers each datagram
// with at most 3x its size (Retry and Reject are far smaller than a 1200-byte Initial).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/endpoint/siphash.h"
#include "transport/endpoint/peer_address.h"
#include "transport/wire/packet.h"

namespace longhaul::endpoint {

// Protocol version a handshake asks for; 1-RTT packets then use it. Equal to the wire
// version (the only one there is).
inline constexpr uint32_t kProtocolVersion = wire::kVersion;
// A client's Initial datagram is padded to at least this many bytes, and a server drops
// shorter ones, so that replies before validation stay below 3x what was received.
inline constexpr size_t kMinInitialSize = 1200;
inline constexpr size_t kAmplificationFactor = 3;
inline constexpr size_t kMaxCookieSize = 64;
inline constexpr size_t kMaxAppDataSize = 900;
inline constexpr size_t kMaxReasonSize = 400;
// The Reject reason for every key that did not authenticate or is not allowed. The
// detail (which check, the client's key) stays in the server's log: a Reject travels in
// the clear, so naming the key would undo the handshake's identity hiding, and telling
// the two apart would confirm a client's guess of the server's key.
inline constexpr char kKeysRefusedReason[] = "the server refused the client's keys";

enum class HandshakeKind : uint8_t {
  kHello = 1,    // client -> server, in Initial packets
  kRetry = 2,    // server -> client, in Retry packets
  kAccept = 3,   // server -> client, in Handshake packets
  kConfirm = 4,  // client -> server, in Handshake packets
  kReject = 5,   // server -> client, in Handshake packets
};
const char* HandshakeKindName(HandshakeKind k);

// Transport parameters a side announces (requested by the client, negotiated values in
// the server's Accept).
struct HandshakeParams {
  uint32_t segment = 0;                // payload bytes per packet this side sends
  uint32_t max_datagram = 0;           // largest datagram this side sends
  uint64_t recv_window = 0;            // this side's receive credit (bytes)
  uint32_t max_inflight_messages = 0;  // must be equal on both sides: min of the two
  uint16_t flows = 1;                  // client's UDP flows (server: the number it accepts)
  uint32_t idle_timeout_ms = 0;        // min of the two sides
  bool operator==(const HandshakeParams&) const = default;
};

// The handshake's protection fields (docs/security.md), present when the mode is not
// plaintext: Hello {mode, the client's cipher mask, Noise message 1}; Accept {mode, the
// chosen cipher, Noise message 2}; Confirm {mode, 0, the 16-byte key confirmation}.
inline constexpr size_t kMaxNoiseSize = 256;
struct SecurityBlock {
  uint8_t mode = 0;     // SecurityMode
  uint8_t ciphers = 0;  // Hello: mask of kCipher*; Accept: the chosen crypto::Cipher
  std::vector<uint8_t> noise;
  bool operator==(const SecurityBlock&) const = default;
};

struct HandshakeMessage {
  HandshakeKind kind = HandshakeKind::kHello;
  uint32_t version = kProtocolVersion;
  uint64_t client_cid = 0;
  uint64_t server_cid = 0;      // Accept, Confirm
  HandshakeParams params;       // Hello, Accept
  std::vector<uint8_t> cookie;  // Hello (may be empty), Retry
  std::string app_data;         // Hello, Accept: opaque application bytes
  std::string reason;           // Reject
  SecurityBlock security;       // Hello, Accept, Confirm (absent on the wire when mode 0)
  bool operator==(const HandshakeMessage&) const = default;
};

// What the key exchange binds (both sides compute the same bytes): a Hello's body without
// its cookie and Noise message (the prologue), and an Accept's body without its Noise
// message (mixed in before message 2).
std::vector<uint8_t> HelloPrologue(const HandshakeMessage& hello);
std::vector<uint8_t> AcceptContext(const HandshakeMessage& accept);

// Encodes a body (the HANDSHAKE frame's content). Errors: InvalidArgument when a field is
// too long (cookie > kMaxCookieSize, app data > kMaxAppDataSize, reason > kMaxReasonSize).
absl::StatusOr<std::vector<uint8_t>> EncodeHandshakeBody(const HandshakeMessage& m);
// Decodes a body; bounds-checked, every error is InvalidArgument naming the field.
absl::StatusOr<HandshakeMessage> DecodeHandshakeBody(std::span<const uint8_t> body);

// The packet type each kind travels in.
wire::PacketType PacketTypeFor(HandshakeKind k);
// The connection id field of the packet carrying `m` (chosen by its receiver: 0 for a
// Hello, the client's id for server messages, the server's id for a Confirm).
uint64_t HeaderCidFor(const HandshakeMessage& m);

// A whole datagram carrying `m`; Hellos are padded to kMinInitialSize.
absl::StatusOr<std::vector<uint8_t>> BuildHandshakePacket(const HandshakeMessage& m);
// Parses a datagram of type Initial/Retry/Handshake: checksum, one HANDSHAKE frame (plus
// PADDING), the body, and that the body's kind matches the packet type.
absl::StatusOr<HandshakeMessage> ParseHandshakePacket(std::span<const uint8_t> datagram);

// ---- stateless cookies ----
//
// cookie = u8 format (1) | u64 issue time (ms on the server's clock) | u64 MAC
// MAC = SipHash-2-4(secret; format, time, client address (PeerAddress bytes), client cid,
//                   version).
// The server keeps nothing per client: a returning Hello proves the client receives at
// its source address. A cookie is accepted for `lifetime` after issue (and not from the
// future beyond a small skew).
inline constexpr size_t kCookieSize = 17;

enum class CookieVerdict { kValid, kExpired, kInvalid };

class CookieMinter {
 public:
  CookieMinter(SipKey secret, Duration lifetime) : secret_(secret), lifetime_(lifetime) {}
  std::vector<uint8_t> Mint(Time now, const PeerAddress& client, uint64_t client_cid,
                            uint32_t version) const;
  CookieVerdict Check(Time now, std::span<const uint8_t> cookie, const PeerAddress& client,
                      uint64_t client_cid, uint32_t version) const;
  Duration lifetime() const { return lifetime_; }

 private:
  uint64_t Mac(uint64_t issued_ms, const PeerAddress& client, uint64_t client_cid,
               uint32_t version) const;
  SipKey secret_;
  Duration lifetime_;
};

}  // namespace longhaul::endpoint
