// PacketProtector: the AEAD sealing of one connection's 1-RTT packets, both directions,
// with key updates and a replay window. Sans-IO: every call takes `now`.
//
// A sealed packet (wire type kSealed, docs/wire-format.md section 9):
//
//   header (20 bytes): version | type (0x04, key phase in bit 7) | flow | connection id |
//                      packet number
//   ciphertext of the frames
//   tag (16 bytes)
//
// The frames are encrypted with AES-256-GCM (or ChaCha20-Poly1305) under the direction's
// current key; the nonce is the key's IV XOR the packet number (never reused: packet
// numbers are never reused within a connection, and every key update starts a new key);
// the header is the additional authenticated data. Then header protection (RFC 9001
// section 5.4, adapted) masks the packet number and the key-phase bit with a mask
// computed from 16 bytes of ciphertext, so a path observer sees neither.
//
// Keys: each direction starts from its Noise traffic secret S0 and ratchets forward,
// S(i+1) = HKDF-Expand(S(i), "longhaul ku"); key and IV of generation i come from S(i), the
// header-protection key from S0. A sender moves to the next generation after
// KeyUpdatePolicy's packet, byte or time budget, but never twice before the peer has
// acknowledged a packet of the current generation (the core's largest acknowledged
// packet number is passed in). A receiver holds the next generation's keys ready (no
// pause), switches when a packet of the other phase authenticates under them, and keeps
// the previous generation for `old_key_lifetime` for packets still in flight. Secrets of
// finished generations are wiped: a stolen current key does not open earlier traffic.
//
// Replays: a window of the last kReplayWindow packet numbers; a packet number seen before,
// or older than the window, is dropped without decryption being trusted.
//
// Thread-safety: none (the endpoint's thread).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "transport/crypto/noise.h"
#include "transport/crypto/primitives.h"

namespace longhaul::crypto {

struct KeyUpdatePolicy {
  // RFC 9001 section 6.6: 2^23 packets is AES-GCM's confidentiality limit per key.
  uint64_t max_packets = uint64_t{1} << 23;
  uint64_t max_bytes = uint64_t{1} << 38;  // 256 GiB
  Duration max_age = Duration::Seconds(120);
  // How long the previous generation's receive keys stay after the peer moved on.
  Duration old_key_lifetime = Duration::Seconds(3);
};

struct ProtectionCounters {
  uint64_t packets_sealed = 0;
  uint64_t packets_opened = 0;
  uint64_t auth_failures = 0;      // tampered, forged, reflected, or under an unknown key
  uint64_t replays = 0;            // a packet number already received
  uint64_t too_old = 0;            // below the replay window
  uint64_t key_updates_sent = 0;   // generations this side moved to
  uint64_t key_updates_received = 0;
  uint64_t old_phase_opened = 0;   // packets of the previous generation, still accepted
};

class PacketProtector {
 public:
  static constexpr size_t kHeaderSize = 20;
  static constexpr size_t kSampleOffset = kHeaderSize;
  // At least one frame byte; the 16-byte header-protection sample may reach into the tag.
  static constexpr size_t kMinSealedSize = kHeaderSize + 1 + kTagSize;
  static constexpr uint64_t kReplayWindow = 1 << 16;

  // `initiator`: this side started the handshake (sends with initiator_to_responder).
  static absl::StatusOr<std::unique_ptr<PacketProtector>> Create(Cipher cipher,
                                                                 const NoiseSplit& split,
                                                                 bool initiator,
                                                                 KeyUpdatePolicy policy, Time now);
  ~PacketProtector();

  // Seals in place a packet the core wrote in sealed mode: `packet` is the header, the
  // frames and kTagSize bytes left for the tag; its type byte says kOneRtt. `largest_acked`
  // is the highest packet number of ours the peer acknowledged (-1: none yet).
  // `elsewhere`: frame bytes the core left out of the packet (offsets from the packet's
  // start, after the header, ascending), encrypted from their sources into place.
  void Seal(Time now, std::span<uint8_t> packet, int64_t largest_acked,
            std::span<const PlaintextPiece> elsewhere = {});

  enum class OpenResult { kOk, kAuthFailed, kReplayed, kTooOld, kMalformed };
  // Opens a sealed datagram in place. On kOk the first `*plaintext_size` bytes are the
  // header (type rewritten to kOneRtt, packet number restored) and the frames.
  OpenResult Open(Time now, std::span<uint8_t> datagram, size_t* plaintext_size);

  // The same in steps, for one pass into the final buffer. BeginOpen unmasks the header
  // into the opening (the datagram stays as it is), checks the replay window and picks
  // the key. The body, datagram bytes [kHeaderSize, size - kTagSize), is then decrypted
  // in order, all of it, by OpenPiece calls, each piece in place (out == in) or into
  // other memory. FinishOpen checks the tag, and only on kOk moves the replay window and
  // the keys, writes the opened header into the datagram and counts the packet. Until it
  // returns kOk nothing decrypted may be trusted, shown or counted as received.
 private:
  struct Keys;

 public:
  struct Opening {
    std::span<uint8_t> datagram;
    uint8_t header[kHeaderSize];
    uint64_t pn = 0;
    Keys* keys = nullptr;
    int which = 0;          // current, previous or next generation
    size_t decrypted = 0;   // body bytes given to OpenPiece
    Aead::Opening aead;
  };
  OpenResult BeginOpen(Time now, std::span<uint8_t> datagram, Opening* o);
  void OpenPiece(Opening* o, uint8_t* out, const uint8_t* in, size_t n);
  OpenResult FinishOpen(Time now, Opening* o, size_t* plaintext_size);

  // A 16-byte proof that this side holds the traffic keys of this handshake (the client's
  // Confirm carries it; the server checks it). Constant-time comparison in Verify.
  std::array<uint8_t, 16> ConfirmProof() const;
  bool VerifyConfirmProof(std::span<const uint8_t> proof) const;

  const ProtectionCounters& counters() const { return counters_; }
  Cipher cipher() const { return cipher_; }
  uint64_t send_generation() const { return send_.generation; }
  uint64_t receive_generation() const { return recv_generation_; }

 private:
  // One generation's keys; the secret is wiped wherever a Keys goes (a moved-from one
  // included).
  struct Keys {
    uint64_t generation = 0;
    Key32 secret{};
    std::unique_ptr<Aead> aead;
    uint8_t iv[kNonceSize] = {};
    Keys() = default;
    Keys(Keys&& o) noexcept
        : generation(o.generation), secret(o.secret), aead(std::move(o.aead)) {
      std::memcpy(iv, o.iv, kNonceSize);
      Wipe(o.secret);
    }
    Keys& operator=(Keys&& o) noexcept {
      generation = o.generation;
      secret = o.secret;
      aead = std::move(o.aead);
      std::memcpy(iv, o.iv, kNonceSize);
      Wipe(o.secret);
      return *this;
    }
    ~Keys() { Wipe(secret); }
  };
  PacketProtector(Cipher cipher, KeyUpdatePolicy policy);
  absl::Status Derive(const Key32& secret, uint64_t generation, Keys* out);
  absl::Status Next(const Keys& from, Keys* out);
  static void Nonce(const uint8_t iv[kNonceSize], uint64_t pn, uint8_t out[kNonceSize]);
  bool ReplaySeen(uint64_t pn) const;
  void ReplayMark(uint64_t pn);

  Cipher cipher_;
  KeyUpdatePolicy policy_;
  std::unique_ptr<HeaderMask> send_mask_;
  std::unique_ptr<HeaderMask> recv_mask_;
  Key32 confirm_key_{};  // from the initiator-to-responder secret
  Key32 handshake_hash_{};

  // sending
  Keys send_;
  uint64_t send_packets_ = 0;
  uint64_t send_bytes_ = 0;
  Time send_since_;
  int64_t send_first_pn_ = -1;  // first packet number sealed in the current generation

  // receiving
  Keys recv_current_;
  Keys recv_next_;
  Keys recv_previous_;
  bool has_previous_ = false;
  Time previous_until_;
  uint64_t recv_generation_ = 0;
  uint64_t current_min_pn_ = UINT64_MAX;  // lowest packet number opened under current

  // replay window: bit i of window_ is packet number largest_ - i
  bool any_received_ = false;
  uint64_t largest_ = 0;
  std::vector<uint64_t> window_;

  ProtectionCounters counters_;
};

}  // namespace longhaul::crypto
