// Sealing and opening 1-RTT packets: round trips in both directions, header protection,
// tampering, replays, packets below the window, reflection, and key updates with
// reordering across the phase change.

#include "transport/crypto/packet_protection.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_config.h"

namespace longhaul::crypto {
namespace {

constexpr Time kT0 = Time::FromNanoseconds(1'000'000'000);

NoiseSplit TestSplit() { return ::longhaul::testing::TestNoiseSplit(); }

// A packet as the core writes it in sealed mode: header, frames, room for the tag.
std::vector<uint8_t> Plain(uint64_t pn, size_t frames = 100, uint8_t fill = 0x5a) {
  std::vector<uint8_t> p(20 + frames + kTagSize, 0);
  p[0] = 1;
  p[1] = 0;
  p[2] = 0;
  p[3] = 3;  // flow
  for (int i = 0; i < 8; ++i) p[4 + i] = static_cast<uint8_t>(uint64_t{0xc1d} >> (8 * (7 - i)));
  for (int i = 0; i < 8; ++i) p[12 + i] = static_cast<uint8_t>(pn >> (8 * (7 - i)));
  for (size_t i = 0; i < frames; ++i) p[20 + i] = static_cast<uint8_t>(fill + i);
  return p;
}

class ProtectionTest : public ::testing::TestWithParam<Cipher> {
 protected:
  void SetUp() override { Make(KeyUpdatePolicy{}); }
  void Make(KeyUpdatePolicy policy) {
    a_ = *PacketProtector::Create(GetParam(), TestSplit(), true, policy, kT0);
    b_ = *PacketProtector::Create(GetParam(), TestSplit(), false, policy, kT0);
  }
  // Seals pn at a and opens it at b; returns b's verdict and checks the plaintext.
  PacketProtector::OpenResult Through(uint64_t pn, Time now = kT0, int64_t acked = -1) {
    std::vector<uint8_t> p = Plain(pn);
    const std::vector<uint8_t> want(p.begin(), p.end() - kTagSize);
    a_->Seal(now, p, acked);
    size_t n = 0;
    PacketProtector::OpenResult r = b_->Open(now, p, &n);
    if (r == PacketProtector::OpenResult::kOk) {
      EXPECT_EQ(n, want.size());
      EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.begin() + n), want);
    }
    return r;
  }
  std::unique_ptr<PacketProtector> a_, b_;
};

TEST_P(ProtectionTest, RoundTripHidesPayloadAndPacketNumber) {
  std::vector<uint8_t> p = Plain(7);
  const std::vector<uint8_t> plain = p;
  a_->Seal(kT0, p, -1);
  EXPECT_EQ(p.size(), plain.size());
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(p[1] & 0x7f, 4);                                   // sealed type, routable
  EXPECT_EQ(std::memcmp(p.data() + 2, plain.data() + 2, 10), 0);  // flow, connection id
  EXPECT_NE(std::memcmp(p.data() + 12, plain.data() + 12, 8), 0);  // packet number masked
  EXPECT_NE(std::memcmp(p.data() + 20, plain.data() + 20, 100), 0);
  size_t n = 0;
  ASSERT_EQ(b_->Open(kT0, p, &n), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.begin() + n),
            std::vector<uint8_t>(plain.begin(), plain.end() - kTagSize));
  // And the other way.
  std::vector<uint8_t> q = Plain(1);
  b_->Seal(kT0, q, -1);
  ASSERT_EQ(a_->Open(kT0, q, &n), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(b_->counters().packets_opened, 1u);
  EXPECT_EQ(a_->counters().packets_sealed, 1u);
}

TEST_P(ProtectionTest, EveryFlippedBitIsRejected) {
  std::vector<uint8_t> sealed = Plain(42, 40);
  a_->Seal(kT0, sealed, -1);
  for (size_t i = 0; i < sealed.size(); ++i) {
    if (i == 0) continue;  // the version byte is the endpoint's to check
    std::vector<uint8_t> t = sealed;
    t[i] ^= (i == 1) ? 0x80 : 0x01;  // in the type byte, the (masked) key phase
    size_t n = 0;
    EXPECT_NE(b_->Open(kT0, t, &n), PacketProtector::OpenResult::kOk) << "byte " << i;
  }
  size_t n = 0;
  EXPECT_EQ(b_->Open(kT0, sealed, &n), PacketProtector::OpenResult::kOk);  // intact still opens
  EXPECT_GE(b_->counters().auth_failures, sealed.size() - 2);
}

TEST_P(ProtectionTest, ReplaysOldPacketsAndReflectionsAreDropped) {
  std::vector<uint8_t> p = Plain(100);
  a_->Seal(kT0, p, -1);
  const std::vector<uint8_t> copy = p;
  size_t n = 0;
  ASSERT_EQ(b_->Open(kT0, p, &n), PacketProtector::OpenResult::kOk);
  std::vector<uint8_t> again = copy;
  EXPECT_EQ(b_->Open(kT0, again, &n), PacketProtector::OpenResult::kReplayed);
  EXPECT_EQ(b_->counters().replays, 1u);
  // Reordered but new: fine. Far behind the window: too old.
  EXPECT_EQ(Through(99), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(Through(100 + PacketProtector::kReplayWindow + 5), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(Through(101), PacketProtector::OpenResult::kTooOld);
  EXPECT_EQ(b_->counters().too_old, 1u);
  // A's packet reflected back to A does not open under A's receive keys.
  std::vector<uint8_t> r = Plain(5);
  a_->Seal(kT0, r, -1);
  EXPECT_EQ(a_->Open(kT0, r, &n), PacketProtector::OpenResult::kAuthFailed);
  // Truncated and foreign datagrams.
  std::vector<uint8_t> shorty(30, 4);
  shorty[0] = 1;
  shorty[1] = 4;
  EXPECT_EQ(b_->Open(kT0, shorty, &n), PacketProtector::OpenResult::kMalformed);
  std::vector<uint8_t> plain = Plain(6);
  EXPECT_EQ(b_->Open(kT0, plain, &n), PacketProtector::OpenResult::kMalformed);
}

TEST_P(ProtectionTest, KeyUpdatesWithoutLossAcrossReordering) {
  KeyUpdatePolicy policy;
  policy.max_packets = 10;
  policy.old_key_lifetime = Duration::Seconds(1);
  Make(policy);
  // Ten packets of generation 0; the eleventh would start generation 1.
  for (uint64_t pn = 0; pn < 10; ++pn) ASSERT_EQ(Through(pn), PacketProtector::OpenResult::kOk);
  // Seal 10..14 (10 starts generation 1), deliver 12, 13, 14 first, then late 9-era is none;
  // then 10 and 11 arrive late.
  std::vector<std::vector<uint8_t>> pk;
  for (uint64_t pn = 10; pn < 15; ++pn) {
    pk.push_back(Plain(pn));
    a_->Seal(kT0, pk.back(), /*largest_acked=*/9);
  }
  EXPECT_EQ(a_->send_generation(), 1u);
  size_t n = 0;
  for (int i : {2, 3, 4, 0, 1}) {
    ASSERT_EQ(b_->Open(kT0, pk[i], &n), PacketProtector::OpenResult::kOk) << "packet " << 10 + i;
  }
  EXPECT_EQ(b_->receive_generation(), 1u);
  EXPECT_EQ(b_->counters().key_updates_received, 1u);
  EXPECT_EQ(b_->counters().auth_failures, 0u);
  EXPECT_EQ(b_->counters().packets_opened, 15u);
}

TEST_P(ProtectionTest, NoSecondUpdateBeforeThePeerAcknowledgesTheFirst) {
  KeyUpdatePolicy policy;
  policy.max_packets = 5;
  Make(policy);
  uint64_t pn = 0;
  for (; pn < 5; ++pn) ASSERT_EQ(Through(pn, kT0, -1), PacketProtector::OpenResult::kOk);
  // Generation 1 starts at pn 5 (the first update needs no acknowledgement).
  for (; pn < 20; ++pn) ASSERT_EQ(Through(pn, kT0, 4), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(a_->send_generation(), 1u);  // nothing of generation 1 acknowledged yet
  // Once pn 5 is acknowledged, the next budget moves to generation 2.
  for (; pn < 30; ++pn) ASSERT_EQ(Through(pn, kT0, 6), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(a_->send_generation(), 2u);
  EXPECT_EQ(b_->receive_generation(), 2u);
  EXPECT_EQ(a_->counters().key_updates_sent, 2u);
}

TEST_P(ProtectionTest, UpdatesByTimeAndOldKeysExpire) {
  KeyUpdatePolicy policy;
  policy.max_age = Duration::Seconds(2);
  policy.old_key_lifetime = Duration::Milliseconds(500);
  Make(policy);
  ASSERT_EQ(Through(0, kT0), PacketProtector::OpenResult::kOk);
  // Two generation-0 packets held back on the path.
  std::vector<uint8_t> held1 = Plain(1), held2 = Plain(2);
  a_->Seal(kT0, held1, 0);
  a_->Seal(kT0, held2, 0);
  // After max_age the next packet starts generation 1 and overtakes them.
  const Time later = kT0 + Duration::Seconds(3);
  ASSERT_EQ(Through(3, later, 2), PacketProtector::OpenResult::kOk);
  EXPECT_EQ(a_->send_generation(), 1u);
  EXPECT_EQ(b_->receive_generation(), 1u);
  size_t n = 0;
  // Within old_key_lifetime the previous generation still opens...
  EXPECT_EQ(b_->Open(later + Duration::Milliseconds(100), held1, &n),
            PacketProtector::OpenResult::kOk);
  EXPECT_EQ(b_->counters().old_phase_opened, 1u);
  // ...after it, its keys are gone.
  EXPECT_EQ(b_->Open(later + Duration::Seconds(1), held2, &n),
            PacketProtector::OpenResult::kAuthFailed);
}

TEST_P(ProtectionTest, ConfirmProofBindsTheHandshake) {
  std::array<uint8_t, 16> proof = a_->ConfirmProof();
  EXPECT_TRUE(b_->VerifyConfirmProof(proof));
  proof[3] ^= 1;
  EXPECT_FALSE(b_->VerifyConfirmProof(proof));
  NoiseSplit other = TestSplit();
  other.handshake_hash.fill(0x34);
  auto c = *PacketProtector::Create(GetParam(), other, false, KeyUpdatePolicy{}, kT0);
  EXPECT_FALSE(c->VerifyConfirmProof(a_->ConfirmProof()));
}

INSTANTIATE_TEST_SUITE_P(Ciphers, ProtectionTest,
                         ::testing::Values(Cipher::kAes256Gcm, Cipher::kChaCha20Poly1305));

}  // namespace
}  // namespace longhaul::crypto
