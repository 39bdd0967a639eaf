// The cryptographic primitives longhaul uses, as thin wrappers over OpenSSL's libcrypto
// (no primitive is written here): X25519, SHA-256, HMAC-SHA256 and HKDF, and the AEADs
// AES-256-GCM and ChaCha20-Poly1305, plus the block function header protection masks
// with. Pure computation: no clock, no files, no global state beyond libcrypto's own.
// Randomness is never drawn here; key generation takes its 32 bytes from the caller.
//
// Errors: libcrypto failures (which only happen on memory exhaustion or a broken
// library) are Internal statuses; an X25519 result of all zeros (a low-order peer key) is
// InvalidArgument; a failed AEAD open is `false`, never an error status.
// Thread-safety: the functions are thread-safe; an Aead or HeaderMask object is not (one
// per direction per connection, used by one thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace longhaul::crypto {

using Key32 = std::array<uint8_t, 32>;
inline constexpr size_t kTagSize = 16;
inline constexpr size_t kNonceSize = 12;

// Lower-case hex of the bytes; parses exactly 64 hex digits (either case).
std::string ToHex(std::span<const uint8_t> bytes);
absl::StatusOr<Key32> Key32FromHex(std::string_view hex);

// Overwrites `key` with zeros in a way the compiler keeps.
void Wipe(std::span<uint8_t> bytes);

// ---- X25519 (RFC 7748) ----
// Every copy wipes its private key when it goes.
struct KeyPair {
  Key32 private_key{};
  Key32 public_key{};
  ~KeyPair() { Wipe(private_key); }
};
// The key pair whose private key is `private_key` (clamped as RFC 7748 says).
absl::StatusOr<KeyPair> KeyPairFromPrivate(const Key32& private_key);
// The shared secret; InvalidArgument when it is all zeros (the peer's key has low order).
absl::StatusOr<Key32> X25519(const Key32& private_key, const Key32& peer_public);

// ---- hashes ----
Key32 Sha256(std::span<const uint8_t> a, std::span<const uint8_t> b = {});
Key32 HmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> data);
// HKDF-Expand (RFC 5869) of one block: HMAC(prk, info || 0x01).
Key32 HkdfExpandLabel(const Key32& prk, std::string_view label);
// Noise's HKDF (section 4.3): two or three 32-byte outputs from a chaining key and input.
void NoiseHkdf(const Key32& chaining_key, std::span<const uint8_t> input, Key32* out1,
               Key32* out2, Key32* out3 = nullptr);

// ---- AEAD ----
enum class Cipher : uint8_t {
  kAes256Gcm = 1,
  kChaCha20Poly1305 = 2,
};
const char* CipherName(Cipher c);
// Whether this CPU has AES instructions (AES-NI / VAES on x86, the crypto extension on
// ARM): AES-256-GCM is the fast choice there, ChaCha20-Poly1305 elsewhere.
bool CpuHasAesInstructions();

// Bytes [offset, offset + length) of a plaintext, kept at `source` (Aead::Seal).
struct PlaintextPiece {
  size_t offset = 0;
  size_t length = 0;
  const uint8_t* source = nullptr;
};

class Aead {
 public:
  // Errors: Internal when libcrypto cannot set the key up.
  static absl::StatusOr<std::unique_ptr<Aead>> Create(Cipher cipher, const Key32& key);
  ~Aead();
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  // Encrypts `data` in place and writes the tag. `aad` is authenticated, not encrypted.
  // `elsewhere` (ascending, disjoint, inside `data`) names ranges of the plaintext that
  // live in other memory: they are encrypted from there straight into place, one pass
  // instead of a copy and an in-place pass. False only if libcrypto fails.
  bool Seal(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad,
            std::span<uint8_t> data, uint8_t tag[kTagSize],
            std::span<const PlaintextPiece> elsewhere = {});
  // Decrypts `data` in place; false when the tag does not authenticate (the data is then
  // garbage and must be dropped).
  bool Open(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad,
            std::span<uint8_t> data, const uint8_t tag[kTagSize]);

  // The same in steps, so that the caller can decide where each piece of the plaintext
  // goes after seeing the ones before it (one pass into the final buffer): OpenBegin,
  // OpenUpdate over the ciphertext in order (`out` may equal `in`, else they must not
  // overlap), OpenFinish. Nothing decrypted may be trusted or shown before OpenFinish
  // returns true. One opening at a time per Aead.
  struct Opening;
  bool OpenBegin(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad, Opening* o);
  bool OpenUpdate(Opening* o, uint8_t* out, const uint8_t* in, size_t n);
  bool OpenFinish(Opening* o, const uint8_t tag[kTagSize]);
  Cipher cipher() const { return cipher_; }

 private:
  struct Ctx;
  Aead(Cipher cipher, std::unique_ptr<Ctx> ctx);
  Cipher cipher_;
  std::unique_ptr<Ctx> ctx_;
};

// An opening in progress (Aead::OpenBegin); the caller owns it.
struct Aead::Opening {
  alignas(64) unsigned char state[1024];  // the library's GCM context
  bool ok = true;
};

// The header-protection mask (RFC 9001 section 5.4, adapted): 16 bytes from a 16-byte
// sample of the ciphertext, AES-256-ECB of the sample for AES-GCM connections, the
// ChaCha20 keystream block (counter and nonce taken from the sample) otherwise.
class HeaderMask {
 public:
  static absl::StatusOr<std::unique_ptr<HeaderMask>> Create(Cipher cipher, const Key32& key);
  ~HeaderMask();
  HeaderMask(const HeaderMask&) = delete;
  HeaderMask& operator=(const HeaderMask&) = delete;
  bool Compute(const uint8_t sample[16], uint8_t mask[16]);

 private:
  struct Ctx;
  HeaderMask(Cipher cipher, std::unique_ptr<Ctx> ctx);
  Cipher cipher_;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace longhaul::crypto
