// Follows the Noise specification's HandshakeState and SymmetricState (sections 5.1-5.3)
// for exactly the three patterns we use, token by token, so that a reader can check each
// step against the specification's pattern table.

#include "transport/crypto/noise.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::crypto {
namespace {

const char* ProtocolName(NoisePattern p) {
  switch (p) {
    case NoisePattern::kIK:
      return "Noise_IK_25519_AESGCM_SHA256";
    case NoisePattern::kIKpsk1:
      return "Noise_IKpsk1_25519_AESGCM_SHA256";
    case NoisePattern::kNNpsk0:
      return "Noise_NNpsk0_25519_AESGCM_SHA256";
  }
  return "";
}

// AESGCM's nonce in Noise: 32 zero bits, then the counter big-endian.
void NoiseNonce(uint64_t n, uint8_t out[kNonceSize]) {
  std::memset(out, 0, 4);
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<uint8_t>(n >> (8 * (7 - i)));
}

absl::Status Unauthenticated(const char* what) {
  return absl::PermissionDeniedError(absl::StrCat("handshake does not authenticate (", what, ")"));
}

}  // namespace

const char* NoisePatternName(NoisePattern p) {
  switch (p) {
    case NoisePattern::kIK:
      return "IK";
    case NoisePattern::kIKpsk1:
      return "IKpsk1";
    case NoisePattern::kNNpsk0:
      return "NNpsk0";
  }
  return "unknown";
}

NoiseHandshake::NoiseHandshake(NoisePattern pattern, bool initiator)
    : pattern_(pattern), initiator_(initiator) {
  const std::string name = ProtocolName(pattern);
  if (name.size() <= 32) {
    std::memcpy(h_.data(), name.data(), name.size());
  } else {
    h_ = Sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(name.data()),
                                         name.size()));
  }
  ck_ = h_;
}

NoiseHandshake::~NoiseHandshake() {
  Wipe(ck_);
  Wipe(k_);
  Wipe(s_.private_key);
  Wipe(e_.private_key);
  if (psk_) Wipe(*psk_);
}

absl::StatusOr<NoiseHandshake> NoiseHandshake::Initiator(NoisePattern pattern,
                                                         const NoiseKeys& keys,
                                                         std::span<const uint8_t> prologue,
                                                         const Key32& ephemeral_private) {
  const bool ik = pattern != NoisePattern::kNNpsk0;
  if (ik && (!keys.static_key || !keys.remote_static)) {
    return absl::InvalidArgumentError(absl::StrCat(
        NoisePatternName(pattern), ": the client needs its key pair and the server's public key"));
  }
  return Start(pattern, true, keys, prologue, ephemeral_private);
}

absl::StatusOr<NoiseHandshake> NoiseHandshake::Responder(NoisePattern pattern,
                                                         const NoiseKeys& keys,
                                                         std::span<const uint8_t> prologue,
                                                         const Key32& ephemeral_private) {
  const bool ik = pattern != NoisePattern::kNNpsk0;
  if (ik && !keys.static_key) {
    return absl::InvalidArgumentError(
        absl::StrCat(NoisePatternName(pattern), ": the server needs its key pair"));
  }
  return Start(pattern, false, keys, prologue, ephemeral_private);
}

absl::StatusOr<NoiseHandshake> NoiseHandshake::Start(NoisePattern pattern, bool initiator,
                                                     const NoiseKeys& keys,
                                                     std::span<const uint8_t> prologue,
                                                     const Key32& ephemeral_private) {
  NoiseHandshake hs(pattern, initiator);
  if (hs.psk_mode() && !keys.psk) {
    return absl::InvalidArgumentError(
        absl::StrCat(NoisePatternName(pattern), ": a pre-shared key is needed"));
  }
  LH_ASSIGN_OR_RETURN(hs.e_, KeyPairFromPrivate(ephemeral_private));
  const bool ik = pattern != NoisePattern::kNNpsk0;
  if (ik) {
    hs.s_ = *keys.static_key;
    hs.has_s_ = true;
    if (initiator) hs.rs_ = keys.remote_static;
  }
  hs.psk_ = keys.psk;
  hs.MixHash(prologue);
  // Pre-message <- s: the responder's static public key.
  if (ik) hs.MixHash(initiator ? *hs.rs_ : hs.s_.public_key);
  return hs;
}

// ---- SymmetricState ----

void NoiseHandshake::MixHash(std::span<const uint8_t> data) { h_ = Sha256(h_, data); }

void NoiseHandshake::MixContext(std::span<const uint8_t> bytes) { MixHash(bytes); }

void NoiseHandshake::MixKey(std::span<const uint8_t> input) {
  Key32 temp_k;
  NoiseHkdf(ck_, input, &ck_, &temp_k);
  k_ = temp_k;
  Wipe(temp_k);
  has_k_ = true;
  n_ = 0;
}

void NoiseHandshake::MixKeyAndHash(const Key32& input) {
  Key32 temp_h, temp_k;
  NoiseHkdf(ck_, input, &ck_, &temp_h, &temp_k);
  MixHash(temp_h);
  k_ = temp_k;
  Wipe(temp_k);
  has_k_ = true;
  n_ = 0;
}

absl::Status NoiseHandshake::MixDh(const Key32& priv, const Key32& pub) {
  absl::StatusOr<Key32> dh = X25519(priv, pub);
  if (!dh.ok()) return Unauthenticated("an unusable public key");
  MixKey(*dh);
  Wipe(*dh);
  return absl::OkStatus();
}

void NoiseHandshake::EncryptAndHash(std::span<const uint8_t> plaintext,
                                    std::vector<uint8_t>* out) {
  const size_t at = out->size();
  out->insert(out->end(), plaintext.begin(), plaintext.end());
  if (has_k_) {
    out->resize(at + plaintext.size() + kTagSize);
    uint8_t nonce[kNonceSize];
    NoiseNonce(n_++, nonce);
    absl::StatusOr<std::unique_ptr<Aead>> aead = Aead::Create(Cipher::kAes256Gcm, k_);
    if (!aead.ok() ||
        !(*aead)->Seal(nonce, h_, std::span<uint8_t>(out->data() + at, plaintext.size()),
                       out->data() + at + plaintext.size())) {
      std::abort();  // libcrypto failing to encrypt: nothing sane to send
    }
  }
  MixHash(std::span<const uint8_t>(out->data() + at, out->size() - at));
}

absl::Status NoiseHandshake::DecryptAndHash(std::span<const uint8_t> ciphertext,
                                            std::vector<uint8_t>* out) {
  if (!has_k_) {
    out->assign(ciphertext.begin(), ciphertext.end());
    MixHash(ciphertext);
    return absl::OkStatus();
  }
  if (ciphertext.size() < kTagSize) return absl::InvalidArgumentError("handshake message too short");
  const size_t n = ciphertext.size() - kTagSize;
  out->assign(ciphertext.begin(), ciphertext.begin() + n);
  uint8_t nonce[kNonceSize];
  NoiseNonce(n_++, nonce);
  LH_ASSIGN_OR_RETURN(std::unique_ptr<Aead> aead, Aead::Create(Cipher::kAes256Gcm, k_));
  if (!aead->Open(nonce, h_, *out, ciphertext.data() + n)) {
    return Unauthenticated("a wrong key or a changed message");
  }
  MixHash(ciphertext);
  return absl::OkStatus();
}

// ---- messages ----

size_t NoiseHandshake::Message1Size(NoisePattern p) {
  // IK: e, s (encrypted), payload tag. NNpsk0: e, payload tag (psk keys the payload).
  return p == NoisePattern::kNNpsk0 ? 32 + kTagSize : 32 + 32 + kTagSize + kTagSize;
}

size_t NoiseHandshake::Message2Size(NoisePattern p) { return 32 + kTagSize; }

absl::StatusOr<std::vector<uint8_t>> NoiseHandshake::WriteMessage1(
    std::span<const uint8_t> payload) {
  if (!initiator_ || step_ != 0) return absl::FailedPreconditionError("message 1 out of turn");
  step_ = 1;
  std::vector<uint8_t> out;
  if (pattern_ == NoisePattern::kNNpsk0) MixKeyAndHash(*psk_);  // psk
  out.insert(out.end(), e_.public_key.begin(), e_.public_key.end());  // e
  MixHash(e_.public_key);
  if (psk_mode()) MixKey(e_.public_key);
  if (pattern_ != NoisePattern::kNNpsk0) {
    LH_RETURN_IF_ERROR(MixDh(e_.private_key, *rs_));                           // es
    EncryptAndHash(s_.public_key, &out);                                       // s
    LH_RETURN_IF_ERROR(MixDh(s_.private_key, *rs_));                           // ss
  }
  if (pattern_ == NoisePattern::kIKpsk1) MixKeyAndHash(*psk_);  // psk
  EncryptAndHash(payload, &out);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> NoiseHandshake::ReadMessage1(
    std::span<const uint8_t> message) {
  if (initiator_ || step_ != 0) return absl::FailedPreconditionError("message 1 out of turn");
  step_ = 1;
  if (message.size() < Message1Size(pattern_)) {
    return absl::InvalidArgumentError(absl::StrCat("handshake message 1 of ", message.size(),
                                                   " bytes is too short"));
  }
  size_t at = 0;
  if (pattern_ == NoisePattern::kNNpsk0) MixKeyAndHash(*psk_);
  std::memcpy(re_.data(), message.data(), 32);  // e
  at += 32;
  MixHash(re_);
  if (psk_mode()) MixKey(re_);
  std::vector<uint8_t> payload;
  if (pattern_ != NoisePattern::kNNpsk0) {
    LH_RETURN_IF_ERROR(MixDh(s_.private_key, re_));  // es
    std::vector<uint8_t> rs;
    if (absl::Status st = DecryptAndHash(message.subspan(at, 32 + kTagSize), &rs); !st.ok()) {
      return st;  // s
    }
    at += 32 + kTagSize;
    Key32 r;
    std::memcpy(r.data(), rs.data(), 32);
    rs_ = r;
    LH_RETURN_IF_ERROR(MixDh(s_.private_key, *rs_));  // ss
  }
  if (pattern_ == NoisePattern::kIKpsk1) MixKeyAndHash(*psk_);  // psk
  LH_RETURN_IF_ERROR(DecryptAndHash(message.subspan(at), &payload));
  return payload;
}

absl::StatusOr<std::vector<uint8_t>> NoiseHandshake::WriteMessage2(
    std::span<const uint8_t> payload) {
  if (initiator_ || step_ != 1) return absl::FailedPreconditionError("message 2 out of turn");
  step_ = 2;
  std::vector<uint8_t> out(e_.public_key.begin(), e_.public_key.end());  // e
  MixHash(e_.public_key);
  if (psk_mode()) MixKey(e_.public_key);
  LH_RETURN_IF_ERROR(MixDh(e_.private_key, re_));  // ee
  if (pattern_ != NoisePattern::kNNpsk0) {
    LH_RETURN_IF_ERROR(MixDh(e_.private_key, *rs_));  // se
  }
  EncryptAndHash(payload, &out);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> NoiseHandshake::ReadMessage2(
    std::span<const uint8_t> message) {
  if (!initiator_ || step_ != 1) return absl::FailedPreconditionError("message 2 out of turn");
  step_ = 2;
  if (message.size() < Message2Size(pattern_)) {
    return absl::InvalidArgumentError(absl::StrCat("handshake message 2 of ", message.size(),
                                                   " bytes is too short"));
  }
  std::memcpy(re_.data(), message.data(), 32);  // e
  MixHash(re_);
  if (psk_mode()) MixKey(re_);
  LH_RETURN_IF_ERROR(MixDh(e_.private_key, re_));  // ee
  if (pattern_ != NoisePattern::kNNpsk0) {
    LH_RETURN_IF_ERROR(MixDh(s_.private_key, re_));  // se
  }
  std::vector<uint8_t> payload;
  LH_RETURN_IF_ERROR(DecryptAndHash(message.subspan(32), &payload));
  return payload;
}

NoiseSplit NoiseHandshake::Split() const {
  NoiseSplit s;
  NoiseHkdf(ck_, {}, &s.initiator_to_responder, &s.responder_to_initiator);
  s.handshake_hash = h_;
  return s;
}

}  // namespace longhaul::crypto
