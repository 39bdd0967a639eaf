// Every call into libcrypto is checked; a failure there is reported, never ignored. The
// AEAD objects keep one initialised context per operation so that a packet costs an IV
// set-up, not a key schedule.

#include "transport/crypto/primitives.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif
#if defined(LONGHAUL_HAVE_IPSEC_MB)
#include <intel-ipsec-mb.h>
#endif

#include <mutex>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace longhaul::crypto {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const EVP_CIPHER* EvpAead(Cipher c) {
  return c == Cipher::kAes256Gcm ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string ToHex(std::span<const uint8_t> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

absl::StatusOr<Key32> Key32FromHex(std::string_view hex) {
  if (hex.size() != 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 64 hex digits (32 bytes), got ", hex.size(), " characters"));
  }
  Key32 k;
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a hex digit at position ", 2 * i + (hi < 0 ? 1 : 2)));
    }
    k[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return k;
}

void Wipe(std::span<uint8_t> bytes) { OPENSSL_cleanse(bytes.data(), bytes.size()); }

// ---- X25519 ----

absl::StatusOr<KeyPair> KeyPairFromPrivate(const Key32& private_key) {
  KeyPair kp;
  kp.private_key = private_key;
  kp.private_key[0] &= 248;
  kp.private_key[31] &= 127;
  kp.private_key[31] |= 64;
  Pkey pk(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, kp.private_key.data(), 32));
  if (!pk) return absl::InternalError("X25519: cannot load a private key");
  size_t len = 32;
  if (EVP_PKEY_get_raw_public_key(pk.get(), kp.public_key.data(), &len) != 1 || len != 32) {
    return absl::InternalError("X25519: cannot derive the public key");
  }
  return kp;
}

absl::StatusOr<Key32> X25519(const Key32& private_key, const Key32& peer_public) {
  Pkey mine(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(), 32));
  Pkey peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(), 32));
  if (!mine || !peer) return absl::InternalError("X25519: cannot load the keys");
  PkeyCtx ctx(EVP_PKEY_CTX_new(mine.get(), nullptr));
  Key32 out{};
  size_t len = 32;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), out.data(), &len) != 1 || len != 32) {
    return absl::InvalidArgumentError("X25519: the peer's public key is not usable");
  }
  uint8_t any = 0;
  for (uint8_t b : out) any |= b;
  if (any == 0) return absl::InvalidArgumentError("X25519: the peer's public key has low order");
  return out;
}

// ---- hashes ----

Key32 Sha256(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  Key32 out{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned int len = 0;
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, a.data(), a.size()) == 1 &&
                  (b.empty() || EVP_DigestUpdate(ctx, b.data(), b.size()) == 1) &&
                  EVP_DigestFinal_ex(ctx, out.data(), &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) std::abort();  // only on memory exhaustion: there is nothing sane to return
  return out;
}

Key32 HmacSha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  Key32 out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(),
           out.data(), &len) == nullptr) {
    std::abort();
  }
  return out;
}

Key32 HkdfExpandLabel(const Key32& prk, std::string_view label) {
  uint8_t info[64];
  const size_t n = std::min<size_t>(label.size(), sizeof(info) - 1);
  std::memcpy(info, label.data(), n);
  info[n] = 1;
  return HmacSha256(prk, std::span<const uint8_t>(info, n + 1));
}

void NoiseHkdf(const Key32& chaining_key, std::span<const uint8_t> input, Key32* out1,
               Key32* out2, Key32* out3) {
  Key32 temp = HmacSha256(chaining_key, input);
  const uint8_t one = 1;
  *out1 = HmacSha256(temp, std::span<const uint8_t>(&one, 1));
  uint8_t buf[33];
  std::memcpy(buf, out1->data(), 32);
  buf[32] = 2;
  *out2 = HmacSha256(temp, buf);
  if (out3 != nullptr) {
    std::memcpy(buf, out2->data(), 32);
    buf[32] = 3;
    *out3 = HmacSha256(temp, buf);
  }
  Wipe(temp);
  Wipe(buf);
}

// ---- AEAD ----

const char* CipherName(Cipher c) {
  switch (c) {
    case Cipher::kAes256Gcm:
      return "aes-256-gcm";
    case Cipher::kChaCha20Poly1305:
      return "chacha20-poly1305";
  }
  return "unknown";
}

bool CpuHasAesInstructions() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
#elif defined(__aarch64__)
  return (getauxval(AT_HWCAP) & (1 << 3)) != 0;  // HWCAP_AES
#else
  return false;
#endif
}

#if defined(LONGHAUL_HAVE_IPSEC_MB)
// Intel's multi-buffer library runs AES-256-GCM with VAES and AVX-512 where the CPU has
// them (3-5x OpenSSL 3.0 on this project's machines, docs/security.md): one manager per
// process (its direct GCM calls keep their state in the caller's context), the expanded
// key per Aead.
//
// The manager lives in static storage, not in alloc_mb_mgr's heap block: a heap block
// behind a never-freed static pointer was lost each time the NCCL plugin holding this code
// was unloaded (LeakSanitizer: ~200 KB per dlclose), and freeing it in a static destructor
// would pull it from under a driver thread still sealing during exit(). Static storage
// goes with the library and needs no destructor. The library says at run time how much
// it needs; a larger future manager falls back to OpenSSL.
IMB_MGR* IpsecMb() {
  static IMB_MGR* mgr = [] {
    alignas(64) static unsigned char storage[256 << 10];
    if (imb_get_mb_mgr_size() > sizeof(storage)) return static_cast<IMB_MGR*>(nullptr);
    IMB_MGR* m = imb_set_pointers_mb_mgr(storage, 0, 1);
    if (m == nullptr) return static_cast<IMB_MGR*>(nullptr);
    IMB_ARCH arch;
    init_mb_mgr_auto(m, &arch);
    if (imb_get_errno(m) != 0) return static_cast<IMB_MGR*>(nullptr);
    return m;
  }();
  return mgr;
}
#endif

struct Aead::Ctx {
  CipherCtx enc;
  CipherCtx dec;
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  IMB_MGR* mb = nullptr;
  alignas(64) gcm_key_data mb_key;
#endif
};

Aead::Aead(Cipher cipher, std::unique_ptr<Ctx> ctx) : cipher_(cipher), ctx_(std::move(ctx)) {}
Aead::~Aead() {
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (ctx_) OPENSSL_cleanse(&ctx_->mb_key, sizeof(ctx_->mb_key));
#endif
}

absl::StatusOr<std::unique_ptr<Aead>> Aead::Create(Cipher cipher, const Key32& key) {
  auto ctx = std::make_unique<Ctx>();
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (cipher == Cipher::kAes256Gcm && (ctx->mb = IpsecMb()) != nullptr) {
    IMB_AES256_GCM_PRE(ctx->mb, key.data(), &ctx->mb_key);
    return std::unique_ptr<Aead>(new Aead(cipher, std::move(ctx)));
  }
#endif
  ctx->enc.reset(EVP_CIPHER_CTX_new());
  ctx->dec.reset(EVP_CIPHER_CTX_new());
  const EVP_CIPHER* c = EvpAead(cipher);
  if (!ctx->enc || !ctx->dec ||
      EVP_EncryptInit_ex(ctx->enc.get(), c, nullptr, key.data(), nullptr) != 1 ||
      EVP_DecryptInit_ex(ctx->dec.get(), c, nullptr, key.data(), nullptr) != 1) {
    return absl::InternalError(absl::StrCat("cannot set up ", CipherName(cipher)));
  }
  return std::unique_ptr<Aead>(new Aead(cipher, std::move(ctx)));
}

namespace {

// Calls run(out, in, length) over `data` in order: in place, except the ranges of
// `elsewhere`, which come from their sources.
template <typename Run>
bool ForEachSealRun(std::span<uint8_t> data, std::span<const PlaintextPiece> elsewhere, Run run) {
  size_t at = 0;
  for (const PlaintextPiece& p : elsewhere) {
    CHECK(p.offset >= at && p.offset + p.length <= data.size()) << "plaintext piece out of order";
    if (p.offset > at && !run(data.data() + at, data.data() + at, p.offset - at)) return false;
    if (p.length > 0 && !run(data.data() + p.offset, p.source, p.length)) return false;
    at = p.offset + p.length;
  }
  return at == data.size() || run(data.data() + at, data.data() + at, data.size() - at);
}

}  // namespace

bool Aead::Seal(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad,
                std::span<uint8_t> data, uint8_t tag[kTagSize],
                std::span<const PlaintextPiece> elsewhere) {
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (ctx_->mb != nullptr) {
    gcm_context_data gcm;
    if (elsewhere.empty()) {
      IMB_AES256_GCM_ENC(ctx_->mb, &ctx_->mb_key, &gcm, data.data(), data.data(), data.size(),
                         nonce, aad.data(), aad.size(), tag, kTagSize);
      return true;
    }
    IMB_AES256_GCM_INIT(ctx_->mb, &ctx_->mb_key, &gcm, nonce, aad.data(), aad.size());
    ForEachSealRun(data, elsewhere, [&](uint8_t* out, const uint8_t* in, size_t n) {
      IMB_AES256_GCM_ENC_UPDATE(ctx_->mb, &ctx_->mb_key, &gcm, out, in, n);
      return true;
    });
    IMB_AES256_GCM_ENC_FINALIZE(ctx_->mb, &ctx_->mb_key, &gcm, tag, kTagSize);
    return true;
  }
#endif
  EVP_CIPHER_CTX* c = ctx_->enc.get();
  int len = 0;
  if (EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, nonce) != 1) return false;
  if (!aad.empty() && EVP_EncryptUpdate(c, nullptr, &len, aad.data(), aad.size()) != 1) {
    return false;
  }
  // GCM and ChaCha20-Poly1305 are stream modes: every update writes all it is given.
  if (!ForEachSealRun(data, elsewhere, [&](uint8_t* out, const uint8_t* in, size_t n) {
        return EVP_EncryptUpdate(c, out, &len, in, static_cast<int>(n)) == 1;
      })) {
    return false;
  }
  if (EVP_EncryptFinal_ex(c, data.data() + data.size(), &len) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, kTagSize, tag) == 1;
}

bool Aead::Open(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad,
                std::span<uint8_t> data, const uint8_t tag[kTagSize]) {
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (ctx_->mb != nullptr) {
    gcm_context_data gcm;
    uint8_t computed[kTagSize];
    IMB_AES256_GCM_DEC(ctx_->mb, &ctx_->mb_key, &gcm, data.data(), data.data(), data.size(),
                       nonce, aad.data(), aad.size(), computed, kTagSize);
    return CRYPTO_memcmp(computed, tag, kTagSize) == 0;
  }
#endif
  EVP_CIPHER_CTX* c = ctx_->dec.get();
  int len = 0;
  if (EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, nonce) != 1) return false;
  if (!aad.empty() && EVP_DecryptUpdate(c, nullptr, &len, aad.data(), aad.size()) != 1) {
    return false;
  }
  if (!data.empty() &&
      EVP_DecryptUpdate(c, data.data(), &len, data.data(), static_cast<int>(data.size())) != 1) {
    return false;
  }
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, kTagSize, const_cast<uint8_t*>(tag)) != 1) {
    return false;
  }
  return EVP_DecryptFinal_ex(c, data.data() + data.size(), &len) == 1;
}

bool Aead::OpenBegin(const uint8_t nonce[kNonceSize], std::span<const uint8_t> aad,
                     Opening* o) {
  o->ok = true;
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  static_assert(sizeof(gcm_context_data) <= sizeof(Opening::state));
  if (ctx_->mb != nullptr) {
    auto* gcm = reinterpret_cast<gcm_context_data*>(o->state);
    IMB_AES256_GCM_INIT(ctx_->mb, &ctx_->mb_key, gcm, nonce, aad.data(), aad.size());
    return true;
  }
#endif
  EVP_CIPHER_CTX* c = ctx_->dec.get();
  int len = 0;
  o->ok = EVP_DecryptInit_ex(c, nullptr, nullptr, nullptr, nonce) == 1 &&
          (aad.empty() || EVP_DecryptUpdate(c, nullptr, &len, aad.data(), aad.size()) == 1);
  return o->ok;
}

bool Aead::OpenUpdate(Opening* o, uint8_t* out, const uint8_t* in, size_t n) {
  if (n == 0) return o->ok;
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (ctx_->mb != nullptr) {
    auto* gcm = reinterpret_cast<gcm_context_data*>(o->state);
    IMB_AES256_GCM_DEC_UPDATE(ctx_->mb, &ctx_->mb_key, gcm, out, in, n);
    return true;
  }
#endif
  int len = 0;
  // A stream mode: every update writes all it is given.
  if (o->ok) o->ok = EVP_DecryptUpdate(ctx_->dec.get(), out, &len, in, static_cast<int>(n)) == 1;
  return o->ok;
}

bool Aead::OpenFinish(Opening* o, const uint8_t tag[kTagSize]) {
#if defined(LONGHAUL_HAVE_IPSEC_MB)
  if (ctx_->mb != nullptr) {
    auto* gcm = reinterpret_cast<gcm_context_data*>(o->state);
    uint8_t computed[kTagSize];
    IMB_AES256_GCM_DEC_FINALIZE(ctx_->mb, &ctx_->mb_key, gcm, computed, kTagSize);
    return CRYPTO_memcmp(computed, tag, kTagSize) == 0;
  }
#endif
  EVP_CIPHER_CTX* c = ctx_->dec.get();
  int len = 0;
  uint8_t none[16];
  return o->ok &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, kTagSize, const_cast<uint8_t*>(tag)) == 1 &&
         EVP_DecryptFinal_ex(c, none, &len) == 1;
}

// ---- header protection ----

struct HeaderMask::Ctx {
  CipherCtx ctx;
  Key32 key;
};

HeaderMask::HeaderMask(Cipher cipher, std::unique_ptr<Ctx> ctx)
    : cipher_(cipher), ctx_(std::move(ctx)) {}
HeaderMask::~HeaderMask() {
  if (ctx_) Wipe(ctx_->key);
}

absl::StatusOr<std::unique_ptr<HeaderMask>> HeaderMask::Create(Cipher cipher, const Key32& key) {
  auto ctx = std::make_unique<Ctx>();
  ctx->ctx.reset(EVP_CIPHER_CTX_new());
  ctx->key = key;
  if (!ctx->ctx) return absl::InternalError("header protection: out of memory");
  if (cipher == Cipher::kAes256Gcm) {
    if (EVP_EncryptInit_ex(ctx->ctx.get(), EVP_aes_256_ecb(), nullptr, key.data(), nullptr) != 1 ||
        EVP_CIPHER_CTX_set_padding(ctx->ctx.get(), 0) != 1) {
      return absl::InternalError("header protection: cannot set up AES-256-ECB");
    }
  }
  return std::unique_ptr<HeaderMask>(new HeaderMask(cipher, std::move(ctx)));
}

bool HeaderMask::Compute(const uint8_t sample[16], uint8_t mask[16]) {
  EVP_CIPHER_CTX* c = ctx_->ctx.get();
  int len = 0;
  if (cipher_ == Cipher::kAes256Gcm) {
    return EVP_EncryptUpdate(c, mask, &len, sample, 16) == 1 && len == 16;
  }
  // ChaCha20 with the sample as its 16-byte IV (block counter and nonce), on zeros.
  static const uint8_t kZeros[16] = {};
  return EVP_EncryptInit_ex(c, EVP_chacha20(), nullptr, ctx_->key.data(), sample) == 1 &&
         EVP_EncryptUpdate(c, mask, &len, kZeros, 16) == 1 && len == 16;
}

}  // namespace longhaul::crypto
