// The authenticated key exchange of longhaul's handshake: the Noise protocol framework
// (revision 34), two messages, with X25519, AES-256-GCM and SHA-256, in one of three
// patterns:
//
//   IK      <- s  ...  -> e, es, s, ss      <- e, ee, se
//           each side holds a static key pair; the client (initiator) knows the server's
//           public key; the server checks the client's against its allowed keys
//   IKpsk1  IK with a pre-shared key mixed in at the end of the first message (both
//           proofs needed, and a server checks both before it keeps any state)
//   NNpsk0  -> psk, e      <- e, ee         a pre-shared key only
//
// Every pattern uses fresh ephemeral keys on both sides, so the traffic keys have forward
// secrecy. The prologue binds the handshake to what else the Hello and the Accept say
// (parameters, connection ids): an attacker who changes any of it breaks the exchange.
// Split() gives the two traffic secrets (initiator to responder, responder to initiator).
//
// This implements the framework's state machine over the primitives of primitives.h;
// nothing here is a primitive. Errors: InvalidArgument for a message of the wrong size,
// PermissionDenied when a message does not authenticate (a wrong key on either side, a
// wrong pre-shared key, tampering). Not thread-safe; one object per handshake, used once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/crypto/primitives.h"

namespace longhaul::crypto {

enum class NoisePattern : uint8_t { kIK = 1, kIKpsk1 = 2, kNNpsk0 = 3 };
const char* NoisePatternName(NoisePattern p);

// Every copy wipes its secrets when it goes (the key pair wipes its own).
struct NoiseKeys {
  // IK, IKpsk1: this side's static key pair; the initiator also the responder's public key.
  std::optional<KeyPair> static_key;
  std::optional<Key32> remote_static;  // initiator only
  std::optional<Key32> psk;            // IKpsk1, NNpsk0
  ~NoiseKeys() {
    if (psk) Wipe(*psk);
  }
};

// The two traffic secrets after the exchange; every copy wipes them when it goes.
struct NoiseSplit {
  Key32 initiator_to_responder{};
  Key32 responder_to_initiator{};
  Key32 handshake_hash{};  // h: identifies this handshake (channel binding)
  ~NoiseSplit() {
    Wipe(initiator_to_responder);
    Wipe(responder_to_initiator);
  }
};

class NoiseHandshake {
 public:
  // `ephemeral_private` is 32 fresh random bytes (from the caller's entropy source).
  // Errors: InvalidArgument when the keys the pattern needs are missing.
  static absl::StatusOr<NoiseHandshake> Initiator(NoisePattern pattern, const NoiseKeys& keys,
                                                  std::span<const uint8_t> prologue,
                                                  const Key32& ephemeral_private);
  static absl::StatusOr<NoiseHandshake> Responder(NoisePattern pattern, const NoiseKeys& keys,
                                                  std::span<const uint8_t> prologue,
                                                  const Key32& ephemeral_private);
  ~NoiseHandshake();
  NoiseHandshake(NoiseHandshake&&) = default;
  // A copy continues from the same state independently (a test or fuzz target starts many
  // handshakes from one prepared state); each copy wipes its own secrets.
  NoiseHandshake(const NoiseHandshake&) = default;
  NoiseHandshake& operator=(NoiseHandshake&&) = default;

  // Mixes more context into the transcript (both sides must mix the same bytes at the same
  // point): the responder mixes what its Accept says before WriteMessage2; the initiator
  // before ReadMessage2.
  void MixContext(std::span<const uint8_t> bytes);

  // Initiator: the first message, carrying `payload` encrypted.
  absl::StatusOr<std::vector<uint8_t>> WriteMessage1(std::span<const uint8_t> payload);
  // Responder: reads it; returns the payload.
  absl::StatusOr<std::vector<uint8_t>> ReadMessage1(std::span<const uint8_t> message);
  // Responder: the initiator's static public key, after ReadMessage1 (IK patterns).
  const std::optional<Key32>& remote_static() const { return rs_; }
  absl::StatusOr<std::vector<uint8_t>> WriteMessage2(std::span<const uint8_t> payload);
  absl::StatusOr<std::vector<uint8_t>> ReadMessage2(std::span<const uint8_t> message);

  // After the second message.
  NoiseSplit Split() const;

  // Sizes of the two messages with an empty payload.
  static size_t Message1Size(NoisePattern p);
  static size_t Message2Size(NoisePattern p);

 private:
  NoiseHandshake(NoisePattern pattern, bool initiator);
  // What both sides do once their keys are checked: the ephemeral key pair, the static
  // pair (IK patterns), the pre-shared key, the prologue and the pre-message (the
  // responder's static public key, known to both).
  static absl::StatusOr<NoiseHandshake> Start(NoisePattern pattern, bool initiator,
                                              const NoiseKeys& keys,
                                              std::span<const uint8_t> prologue,
                                              const Key32& ephemeral_private);
  void MixHash(std::span<const uint8_t> data);
  void MixKey(std::span<const uint8_t> input);
  void MixKeyAndHash(const Key32& input);
  absl::Status MixDh(const Key32& priv, const Key32& pub);
  void EncryptAndHash(std::span<const uint8_t> plaintext, std::vector<uint8_t>* out);
  absl::Status DecryptAndHash(std::span<const uint8_t> ciphertext, std::vector<uint8_t>* out);
  bool psk_mode() const { return pattern_ != NoisePattern::kIK; }

  NoisePattern pattern_;
  bool initiator_;
  Key32 ck_{};  // chaining key
  Key32 h_{};   // handshake hash
  Key32 k_{};   // cipher key (valid when has_k_)
  bool has_k_ = false;
  uint64_t n_ = 0;  // cipher nonce
  KeyPair s_{};
  bool has_s_ = false;
  KeyPair e_{};
  std::optional<Key32> rs_;
  Key32 re_{};
  std::optional<Key32> psk_;
  int step_ = 0;
};

}  // namespace longhaul::crypto
