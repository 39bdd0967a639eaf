// The three handshake patterns between our initiator and responder: both sides derive the
// same traffic secrets, and a wrong static key, a wrong or missing pre-shared key, a
// changed prologue, context or message byte each make the exchange fail to authenticate.

#include "transport/crypto/noise.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::crypto {
namespace {

Key32 Fill(uint8_t v) {
  Key32 k;
  k.fill(v);
  return k;
}
KeyPair Pair(uint8_t v) { return *KeyPairFromPrivate(Fill(v)); }
std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

struct Parties {
  NoiseKeys initiator, responder;
};

Parties KeysFor(NoisePattern p) {
  Parties k;
  if (p != NoisePattern::kNNpsk0) {
    k.initiator.static_key = Pair(1);
    k.responder.static_key = Pair(2);
    k.initiator.remote_static = Pair(2).public_key;
  }
  if (p != NoisePattern::kIK) k.initiator.psk = k.responder.psk = Fill(9);
  return k;
}

struct Outcome {
  absl::Status status;
  NoiseSplit i, r;
  std::optional<Key32> seen_static;
  std::vector<uint8_t> payload1, payload2;
};

// Runs both messages; `tamper` may change message 1 (0) or 2 (1) on the way.
Outcome Exchange(NoisePattern p, const Parties& k, const std::string& prologue_i = "hello",
            const std::string& prologue_r = "hello",
            const std::function<void(int, std::vector<uint8_t>&)>& tamper = nullptr,
            const std::string& context_i = "accept", const std::string& context_r = "accept") {
  Outcome o;
  absl::StatusOr<NoiseHandshake> i = NoiseHandshake::Initiator(p, k.initiator, Bytes(prologue_i), Fill(3));
  absl::StatusOr<NoiseHandshake> r = NoiseHandshake::Responder(p, k.responder, Bytes(prologue_r), Fill(4));
  if (!i.ok()) return {i.status()};
  if (!r.ok()) return {r.status()};
  absl::StatusOr<std::vector<uint8_t>> m1 = i->WriteMessage1(Bytes("p1"));
  if (!m1.ok()) return {m1.status()};
  EXPECT_EQ(m1->size(), NoiseHandshake::Message1Size(p) + 2);
  if (tamper) tamper(0, *m1);
  absl::StatusOr<std::vector<uint8_t>> got1 = r->ReadMessage1(*m1);
  if (!got1.ok()) return {got1.status()};
  o.payload1 = *got1;
  o.seen_static = r->remote_static();
  r->MixContext(Bytes(context_r));
  absl::StatusOr<std::vector<uint8_t>> m2 = r->WriteMessage2(Bytes("p2"));
  if (!m2.ok()) return {m2.status()};
  EXPECT_EQ(m2->size(), NoiseHandshake::Message2Size(p) + 2);
  if (tamper) tamper(1, *m2);
  i->MixContext(Bytes(context_i));
  absl::StatusOr<std::vector<uint8_t>> got2 = i->ReadMessage2(*m2);
  if (!got2.ok()) return {got2.status()};
  o.payload2 = *got2;
  o.i = i->Split();
  o.r = r->Split();
  return o;
}

class Patterns : public ::testing::TestWithParam<NoisePattern> {};

TEST_P(Patterns, BothSidesAgree) {
  Outcome o = Exchange(GetParam(), KeysFor(GetParam()));
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.payload1, Bytes("p1"));
  EXPECT_EQ(o.payload2, Bytes("p2"));
  EXPECT_EQ(o.i.initiator_to_responder, o.r.initiator_to_responder);
  EXPECT_EQ(o.i.responder_to_initiator, o.r.responder_to_initiator);
  EXPECT_EQ(o.i.handshake_hash, o.r.handshake_hash);
  EXPECT_NE(o.i.initiator_to_responder, o.i.responder_to_initiator);
  if (GetParam() != NoisePattern::kNNpsk0) {
    ASSERT_TRUE(o.seen_static.has_value());
    EXPECT_EQ(*o.seen_static, Pair(1).public_key);  // the server learns who the client is
  }
}

TEST_P(Patterns, EveryChangedByteFailsToAuthenticate) {
  const Parties k = KeysFor(GetParam());
  for (int which = 0; which < 2; ++which) {
    const size_t size = which == 0 ? NoiseHandshake::Message1Size(GetParam()) + 2
                                   : NoiseHandshake::Message2Size(GetParam()) + 2;
    for (size_t at = 0; at < size; ++at) {
      Outcome o = Exchange(GetParam(), k, "hello", "hello", [&](int m, std::vector<uint8_t>& b) {
        if (m == which) b[at] ^= 0x04;
      });
      EXPECT_FALSE(o.status.ok()) << "message " << which + 1 << " byte " << at;
      if (!o.status.ok()) {
        EXPECT_TRUE(absl::IsPermissionDenied(o.status)) << o.status;
      }
    }
  }
}

TEST_P(Patterns, PrologueAndContextAreBound) {
  const Parties k = KeysFor(GetParam());
  EXPECT_TRUE(absl::IsPermissionDenied(Exchange(GetParam(), k, "hello", "hellO").status));
  EXPECT_TRUE(
      absl::IsPermissionDenied(Exchange(GetParam(), k, "hello", "hello", nullptr, "accept", "acceqt").status));
}

INSTANTIATE_TEST_SUITE_P(All, Patterns,
                         ::testing::Values(NoisePattern::kIK, NoisePattern::kIKpsk1,
                                           NoisePattern::kNNpsk0));

TEST(Noise, WrongKeysFail) {
  // The client expects another server key.
  Parties k = KeysFor(NoisePattern::kIK);
  k.initiator.remote_static = Pair(7).public_key;
  EXPECT_TRUE(absl::IsPermissionDenied(Exchange(NoisePattern::kIK, k).status));
  // Pre-shared keys differ: both patterns fail at message 1 (the server keeps nothing).
  k = KeysFor(NoisePattern::kIKpsk1);
  k.responder.psk = Fill(8);
  EXPECT_TRUE(absl::IsPermissionDenied(Exchange(NoisePattern::kIKpsk1, k).status));
  k = KeysFor(NoisePattern::kNNpsk0);
  k.responder.psk = Fill(8);
  EXPECT_TRUE(absl::IsPermissionDenied(Exchange(NoisePattern::kNNpsk0, k).status));
  // An IK client cannot complete with an IKpsk1 server.
  Parties ik = KeysFor(NoisePattern::kIK);
  absl::StatusOr<NoiseHandshake> i = NoiseHandshake::Initiator(NoisePattern::kIK, ik.initiator, {}, Fill(3));
  Parties psk2 = KeysFor(NoisePattern::kIKpsk1);
  absl::StatusOr<NoiseHandshake> r =
      NoiseHandshake::Responder(NoisePattern::kIKpsk1, psk2.responder, {}, Fill(4));
  ASSERT_TRUE(i.ok() && r.ok());
  absl::StatusOr<std::vector<uint8_t>> m1 = i->WriteMessage1({});
  EXPECT_FALSE(r->ReadMessage1(*m1).ok());
}

TEST(Noise, PskMismatchIsCaughtByTheServerAtMessageOne) {
  for (NoisePattern p : {NoisePattern::kIKpsk1, NoisePattern::kNNpsk0}) {
    Parties k = KeysFor(p);
    k.responder.psk = Fill(8);
    absl::StatusOr<NoiseHandshake> i = NoiseHandshake::Initiator(p, k.initiator, {}, Fill(3));
    absl::StatusOr<NoiseHandshake> r = NoiseHandshake::Responder(p, k.responder, {}, Fill(4));
    absl::StatusOr<std::vector<uint8_t>> m1 = i->WriteMessage1({});
    EXPECT_TRUE(absl::IsPermissionDenied(r->ReadMessage1(*m1).status())) << NoisePatternName(p);
  }
}

TEST(Noise, MissingKeysAndShortMessages) {
  NoiseKeys none;
  EXPECT_TRUE(absl::IsInvalidArgument(
      NoiseHandshake::Initiator(NoisePattern::kIK, none, {}, Fill(3)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      NoiseHandshake::Responder(NoisePattern::kNNpsk0, none, {}, Fill(3)).status()));
  Parties k = KeysFor(NoisePattern::kIK);
  absl::StatusOr<NoiseHandshake> r = NoiseHandshake::Responder(NoisePattern::kIK, k.responder, {}, Fill(4));
  std::vector<uint8_t> shorty(40, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(r->ReadMessage1(shorty).status()));
  EXPECT_FALSE(r->WriteMessage2({}).ok());  // out of turn after a failed read
}

TEST(Noise, FreshEphemeralsGiveFreshSecrets) {
  const Parties k = KeysFor(NoisePattern::kIK);
  auto split = [&](uint8_t e) {
    absl::StatusOr<NoiseHandshake> i = NoiseHandshake::Initiator(NoisePattern::kIK, k.initiator, {}, Fill(e));
    absl::StatusOr<NoiseHandshake> r = NoiseHandshake::Responder(NoisePattern::kIK, k.responder, {}, Fill(4));
    auto m1 = i->WriteMessage1({});
    EXPECT_TRUE(r->ReadMessage1(*m1).ok());
    auto m2 = r->WriteMessage2({});
    EXPECT_TRUE(i->ReadMessage2(*m2).ok());
    return i->Split().initiator_to_responder;
  };
  EXPECT_NE(split(3), split(5));
}

}  // namespace
}  // namespace longhaul::crypto
