// Known-answer tests of the primitives (RFC 7748, FIPS 180-2, RFC 4231, RFC 5869, the GCM
// specification's test cases), and AEAD round trips with every tampering caught.

#include "transport/crypto/primitives.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::crypto {
namespace {

std::vector<uint8_t> Hex(const std::string& h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}
Key32 K(const std::string& h) { return *Key32FromHex(h); }

TEST(X25519, Rfc7748Vectors) {
  const Key32 a = K("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const Key32 b = K("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  absl::StatusOr<KeyPair> ka = KeyPairFromPrivate(a);
  absl::StatusOr<KeyPair> kb = KeyPairFromPrivate(b);
  ASSERT_TRUE(ka.ok() && kb.ok());
  EXPECT_EQ(ToHex(ka->public_key),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  EXPECT_EQ(ToHex(kb->public_key),
            "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  absl::StatusOr<Key32> s1 = X25519(ka->private_key, kb->public_key);
  absl::StatusOr<Key32> s2 = X25519(kb->private_key, ka->public_key);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(ToHex(*s1), "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  EXPECT_EQ(*s1, *s2);
}

TEST(X25519, LowOrderPeerKeysAreRefused) {
  const Key32 a = K("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  Key32 zero{};
  EXPECT_FALSE(X25519(a, zero).ok());
  Key32 one{};
  one[0] = 1;  // the point of order 1... x = 1 is of order 4 on the curve's twist
  EXPECT_FALSE(X25519(a, one).ok());
}

TEST(Hash, KnownAnswers) {
  const std::string abc = "abc";
  EXPECT_EQ(ToHex(Sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(abc.data()),
                                                  abc.size()))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::vector<uint8_t> key(20, 0x0b);
  const std::string hi = "Hi There";
  EXPECT_EQ(ToHex(HmacSha256(key, std::span<const uint8_t>(
                                      reinterpret_cast<const uint8_t*>(hi.data()), hi.size()))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // RFC 5869 test case 1: T(1) of HKDF-Expand is the first 32 bytes of the OKM.
  const Key32 prk = K("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5");
  const std::vector<uint8_t> info = Hex("f0f1f2f3f4f5f6f7f8f9");
  EXPECT_EQ(ToHex(HkdfExpandLabel(prk, std::string(info.begin(), info.end()))),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
}

TEST(Hex, RoundTripAndErrors) {
  const std::string h = "00ff10aB" + std::string(56, '7');
  absl::StatusOr<Key32> k = Key32FromHex(h);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(ToHex(*k), "00ff10ab" + std::string(56, '7'));
  EXPECT_THAT(std::string(Key32FromHex("abc").status().message()),
              ::testing::HasSubstr("expected 64 hex digits"));
  EXPECT_THAT(std::string(Key32FromHex(std::string(63, 'a') + "g").status().message()),
              ::testing::HasSubstr("not a hex digit at position 64"));
}

TEST(Aead, GcmSpecificationTestCases13And14) {
  absl::StatusOr<std::unique_ptr<Aead>> a = Aead::Create(Cipher::kAes256Gcm, Key32{});
  ASSERT_TRUE(a.ok());
  uint8_t nonce[kNonceSize] = {};
  uint8_t tag[kTagSize];
  ASSERT_TRUE((*a)->Seal(nonce, {}, {}, tag));
  EXPECT_EQ(ToHex(tag), "530f8afbc74536b9a963b4f1c4cb738b");
  std::vector<uint8_t> p(16, 0);
  ASSERT_TRUE((*a)->Seal(nonce, {}, p, tag));
  EXPECT_EQ(ToHex(p), "cea7403d4d606b6e074ec5d3baf39d18");
  EXPECT_EQ(ToHex(tag), "d0d1c8a799996bf0265b98b5d48ab919");
  ASSERT_TRUE((*a)->Open(nonce, {}, p, tag));
  EXPECT_EQ(p, std::vector<uint8_t>(16, 0));
}

class AeadRoundTrip : public ::testing::TestWithParam<Cipher> {};

TEST_P(AeadRoundTrip, EveryTamperingIsCaught) {
  const Key32 key = K(std::string(64, '5'));
  absl::StatusOr<std::unique_ptr<Aead>> a = Aead::Create(GetParam(), key);
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> msg(100);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> aad = {1, 2, 3, 4};
  uint8_t nonce[kNonceSize] = {9, 8, 7};
  std::vector<uint8_t> c = msg;
  uint8_t tag[kTagSize];
  ASSERT_TRUE((*a)->Seal(nonce, aad, c, tag));
  EXPECT_NE(c, msg);
  std::vector<uint8_t> o = c;
  ASSERT_TRUE((*a)->Open(nonce, aad, o, tag));
  EXPECT_EQ(o, msg);
  for (size_t i = 0; i < c.size(); i += 7) {
    std::vector<uint8_t> t = c;
    t[i] ^= 1;
    EXPECT_FALSE((*a)->Open(nonce, aad, t, tag)) << "ciphertext byte " << i;
  }
  std::vector<uint8_t> bad_aad = aad;
  bad_aad[0] ^= 0x80;
  o = c;
  EXPECT_FALSE((*a)->Open(nonce, bad_aad, o, tag));
  uint8_t bad_tag[kTagSize];
  std::memcpy(bad_tag, tag, kTagSize);
  bad_tag[15] ^= 1;
  o = c;
  EXPECT_FALSE((*a)->Open(nonce, aad, o, bad_tag));
  uint8_t other_nonce[kNonceSize] = {9, 8, 6};
  o = c;
  EXPECT_FALSE((*a)->Open(other_nonce, aad, o, tag));
  absl::StatusOr<std::unique_ptr<Aead>> b = Aead::Create(GetParam(), K(std::string(64, '6')));
  o = c;
  EXPECT_FALSE((*b)->Open(nonce, aad, o, tag));
}

// One pass: plaintext kept elsewhere is sealed from there into place, and an opening in
// steps writes pieces of the plaintext wherever they go; both give the bytes of the
// one-shot calls, and the stepwise open still catches every tampering.
TEST_P(AeadRoundTrip, PiecesElsewhereSealAndOpenLikeOneBuffer) {
  absl::StatusOr<std::unique_ptr<Aead>> a = Aead::Create(GetParam(), K(std::string(64, '7')));
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> msg(9000);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(i * 7 + i / 251);
  const std::vector<uint8_t> aad = {5, 6, 7};
  uint8_t nonce[kNonceSize] = {1, 2, 3, 4};
  std::vector<uint8_t> whole = msg;
  uint8_t whole_tag[kTagSize];
  ASSERT_TRUE((*a)->Seal(nonce, aad, whole, whole_tag));
  // Two ranges (odd offsets and lengths, not block-aligned) live in other memory; the
  // buffer holds garbage there.
  const std::vector<PlaintextPiece> pieces = {{37, 4001, msg.data() + 37},
                                              {4100, 4799, msg.data() + 4100}};
  std::vector<uint8_t> buf = msg;
  std::fill(buf.begin() + 37, buf.begin() + 37 + 4001, 0xEE);
  std::fill(buf.begin() + 4100, buf.begin() + 4100 + 4799, 0xEE);
  uint8_t tag[kTagSize];
  ASSERT_TRUE((*a)->Seal(nonce, aad, buf, tag, pieces));
  EXPECT_EQ(buf, whole);
  EXPECT_EQ(0, std::memcmp(tag, whole_tag, kTagSize));
  // Open in steps: the frames in place, a middle range into another buffer.
  for (int tamper = -1; tamper < 3; ++tamper) {
    std::vector<uint8_t> c = whole;
    if (tamper >= 0) c[tamper * 3000 + 11] ^= 0x10;
    std::vector<uint8_t> out(c.size(), 0);
    Aead::Opening o;
    ASSERT_TRUE((*a)->OpenBegin(nonce, aad, &o));
    ASSERT_TRUE((*a)->OpenUpdate(&o, c.data(), c.data(), 100));
    ASSERT_TRUE((*a)->OpenUpdate(&o, out.data() + 100, c.data() + 100, 5000));
    ASSERT_TRUE((*a)->OpenUpdate(&o, c.data() + 5100, c.data() + 5100, c.size() - 5100));
    const bool ok = (*a)->OpenFinish(&o, whole_tag);
    EXPECT_EQ(ok, tamper < 0) << "tampered at " << tamper;
    if (tamper < 0) {
      EXPECT_EQ(0, std::memcmp(c.data(), msg.data(), 100));
      EXPECT_EQ(0, std::memcmp(out.data() + 100, msg.data() + 100, 5000));
      EXPECT_EQ(0, std::memcmp(c.data() + 5100, msg.data() + 5100, c.size() - 5100));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ciphers, AeadRoundTrip,
                         ::testing::Values(Cipher::kAes256Gcm, Cipher::kChaCha20Poly1305));

TEST(HeaderMask, DependsOnSampleAndKey) {
  for (Cipher c : {Cipher::kAes256Gcm, Cipher::kChaCha20Poly1305}) {
    absl::StatusOr<std::unique_ptr<HeaderMask>> m = HeaderMask::Create(c, K(std::string(64, '1')));
    absl::StatusOr<std::unique_ptr<HeaderMask>> n = HeaderMask::Create(c, K(std::string(64, '2')));
    ASSERT_TRUE(m.ok() && n.ok());
    uint8_t s1[16] = {1}, s2[16] = {2}, a[16], b[16], a2[16], d[16];
    ASSERT_TRUE((*m)->Compute(s1, a) && (*m)->Compute(s2, b) && (*m)->Compute(s1, a2) &&
                (*n)->Compute(s1, d));
    EXPECT_EQ(std::memcmp(a, a2, 16), 0) << CipherName(c);  // deterministic
    EXPECT_NE(std::memcmp(a, b, 16), 0) << CipherName(c);
    EXPECT_NE(std::memcmp(a, d, 16), 0) << CipherName(c);
  }
}

}  // namespace
}  // namespace longhaul::crypto
