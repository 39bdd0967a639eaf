#include "transport/endpoint/security_config.h"

#include "absl/strings/str_cat.h"

namespace longhaul::endpoint {

const char* SecurityModeName(SecurityMode m) {
  switch (m) {
    case SecurityMode::kPlaintext:
      return "insecure (plaintext)";
    case SecurityMode::kStaticKeys:
      return "Noise IK (static keys)";
    case SecurityMode::kStaticKeysPsk:
      return "Noise IKpsk1 (static keys and a pre-shared key)";
    case SecurityMode::kPsk:
      return "Noise NNpsk0 (pre-shared key)";
  }
  return "unknown";
}

SecurityMode SecurityConfig::mode() const {
  if (insecure) return SecurityMode::kPlaintext;
  if (key.has_value()) return psk ? SecurityMode::kStaticKeysPsk : SecurityMode::kStaticKeys;
  return SecurityMode::kPsk;
}

absl::Status SecurityConfig::Validate() const {
  const bool any_key = key.has_value() || !peer_keys.empty() || psk.has_value();
  if (insecure) {
    if (any_key) {
      return absl::InvalidArgumentError(
          "insecure (plaintext) was chosen together with keys: choose one");
    }
    return absl::OkStatus();
  }
  if (!any_key) {
    return absl::InvalidArgumentError(
        "no keys: give a key pair and the peer's public key, or a pre-shared key, or choose "
        "insecure (plaintext) explicitly");
  }
  if (key.has_value() && peer_keys.empty()) {
    return absl::InvalidArgumentError(
        "a key pair was given without the peer's public key (a client needs the server's, a "
        "server the keys of the clients it allows)");
  }
  if (!key.has_value() && !peer_keys.empty()) {
    return absl::InvalidArgumentError(
        "peer public keys were given without this side's own key pair");
  }
  if (!entropy) {
    return absl::InvalidArgumentError("packet protection needs an entropy source");
  }
  if (key_update.max_packets == 0 || key_update.max_bytes == 0 ||
      key_update.max_age <= Duration::Zero() || key_update.old_key_lifetime < Duration::Zero()) {
    return absl::InvalidArgumentError("key update budgets must be positive");
  }
  return absl::OkStatus();
}

std::string SecurityConfig::Describe() const {
  std::string s = SecurityModeName(mode());
  if (key.has_value() && !insecure) {
    absl::StrAppend(&s, ", key ", crypto::ToHex(key->public_key).substr(0, 16), "...");
  }
  return s;
}

uint8_t LocalCipherMask() {
  return kCipherChaCha | (crypto::CpuHasAesInstructions() ? kCipherAesGcm : 0);
}

crypto::Cipher ChooseCipher(uint8_t client_mask, uint8_t server_mask) {
  if ((client_mask & kCipherAesGcm) && (server_mask & kCipherAesGcm)) {
    return crypto::Cipher::kAes256Gcm;
  }
  return crypto::Cipher::kChaCha20Poly1305;
}

}  // namespace longhaul::endpoint
