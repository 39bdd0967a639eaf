// SecurityConfig: how an endpoint protects its connections (docs/security.md). One of:
//
//   static keys   this side's X25519 key pair and the peer's public key (a client: the
//                 server's; a server: the client keys it allows); Noise IK, or IKpsk1
//                 when a pre-shared key is given too
//   pre-shared    a 32-byte key both sides hold and nothing else; Noise NNpsk0
//   insecure      no protection: plaintext packets with a CRC32C, chosen explicitly
//
// With protection, every 1-RTT packet is sealed with AES-256-GCM (ChaCha20-Poly1305 where
// either side's CPU has no AES instructions), keys are updated by the budgets of
// `key_update`, and replayed, tampered and reflected packets are dropped and counted.
// Keys arrive here as bytes; reading key files is the edge's business
// (transport/crypto/key_files.h). Randomness for the ephemeral keys comes from `entropy`,
// which the driver sets to the system's CSPRNG (tests give a seeded one).
// A value type.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "transport/crypto/noise.h"
#include "transport/crypto/packet_protection.h"
#include "transport/crypto/primitives.h"

namespace longhaul::endpoint {

// What a handshake announces (the Hello's and the Accept's security byte).
enum class SecurityMode : uint8_t {
  kPlaintext = 0,
  kStaticKeys = 1,     // Noise IK
  kStaticKeysPsk = 2,  // Noise IKpsk1
  kPsk = 3,            // Noise NNpsk0
};
const char* SecurityModeName(SecurityMode m);

using EntropySource = std::function<void(std::span<uint8_t>)>;

struct SecurityConfig {
  bool insecure = false;
  std::optional<crypto::KeyPair> key;       // this side's static key pair
  // The peers' public keys: the clients a server allows, and the server a client expects
  // (when a Connect names no key of its own, the endpoint must hold exactly one).
  std::vector<crypto::Key32> peer_keys;
  std::optional<crypto::Key32> psk;
  crypto::KeyUpdatePolicy key_update;
  EntropySource entropy;

  // Every copy wipes its pre-shared key when it goes (the key pair wipes its own).
  SecurityConfig() = default;
  SecurityConfig(const SecurityConfig&) = default;
  SecurityConfig(SecurityConfig&&) = default;
  SecurityConfig& operator=(const SecurityConfig&) = default;
  SecurityConfig& operator=(SecurityConfig&&) = default;
  ~SecurityConfig() {
    if (psk) crypto::Wipe(*psk);
  }

  static SecurityConfig Insecure() {
    SecurityConfig s;
    s.insecure = true;
    return s;
  }
  // The mode these settings give. Only meaningful when Validate() is OK.
  SecurityMode mode() const;
  // Errors: InvalidArgument naming what is missing or contradictory: no choice at all
  // ("no keys: give a key pair and the peer's key, a pre-shared key, or choose insecure"),
  // insecure together with keys, a key pair without peer keys or the reverse, no entropy
  // source with protection on.
  absl::Status Validate() const;
  // A one-line description for logs and tools: "insecure (plaintext)", "Noise IK
  // (static keys), key 3f2a...", "Noise NNpsk0 (pre-shared key)".
  std::string Describe() const;
};

// The AEAD both sides can run fast: AES-256-GCM where this CPU has AES instructions.
uint8_t LocalCipherMask();
inline constexpr uint8_t kCipherAesGcm = 1 << 0;
inline constexpr uint8_t kCipherChaCha = 1 << 1;
// The server's choice for a client that announced `client_mask`.
crypto::Cipher ChooseCipher(uint8_t client_mask, uint8_t server_mask);

}  // namespace longhaul::endpoint
