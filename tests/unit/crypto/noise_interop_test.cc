// Our Noise handshake against implementations the project did not write: test vectors of
// Noise_IK/IKpsk1/NNpsk0_25519_AESGCM_SHA256 produced by noise-c (the reference
// implementation; IK only, as no noise-c build has both AESGCM and the psk modifiers), by
// dissononce (all three) and published by flynn/noise (all three); each file's header says
// exactly which build and how to regenerate it (tools/interop/). With the vector's static
// and ephemeral keys, prologue and payloads, for each vector:
//   - our initiator writes message 1 byte for byte as the vector has it, and reads the
//     vector's message 2 (the other implementation's responder);
//   - our responder reads the vector's message 1 (the other implementation's initiator),
//     learns the initiator's static key, and writes message 2 byte for byte;
//   - both our sides end with the vector's handshake hash (where the vector records it),
//     and their split keys encrypt the vector's two after-handshake messages (AES-256-GCM,
//     Noise's nonce 0, no associated data) to the same bytes;
//   - a changed byte or a wrong pre-shared key makes the vector's messages fail to
//     authenticate.
// MixContext (longhaul's addition before message 2) is not used: plain Noise has no such
// step. LONGHAUL_NOISE_VECTORS (files separated by ':') replaces the committed files; the
// live interop test runs this test on vectors freshly made by noise-c.

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "transport/crypto/noise.h"

namespace longhaul::crypto {
namespace {

using Bytes = std::vector<uint8_t>;

struct Vector {
  std::string file;
  int line = 0;  // where the vector starts
  std::map<std::string, std::string> fields;

  bool Has(const std::string& k) const { return fields.count(k) > 0; }
  const std::string& Get(const std::string& k) const {
    static const std::string empty;
    auto it = fields.find(k);
    return it == fields.end() ? empty : it->second;
  }
};

Bytes FromHex(const std::string& hex) {
  Bytes out;
  EXPECT_EQ(hex.size() % 2, 0u) << hex;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

Key32 Key(const std::string& hex) {
  absl::StatusOr<Key32> k = Key32FromHex(hex);
  EXPECT_TRUE(k.ok()) << hex << ": " << k.status();
  return k.ok() ? *k : Key32{};
}

std::vector<Vector> Load(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<Vector> out;
  Vector cur;
  std::string line;
  int n = 0;
  auto flush = [&] {
    if (!cur.fields.empty()) out.push_back(cur);
    cur = Vector{path, 0, {}};
  };
  cur.file = path;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') {
      flush();
      continue;
    }
    const size_t eq = line.find('=');
    EXPECT_NE(eq, std::string::npos) << path << ":" << n << ": " << line;
    if (eq == std::string::npos) continue;
    if (cur.fields.empty()) cur.line = n;
    cur.fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  flush();
  return out;
}

std::vector<std::string> VectorFiles() {
  if (const char* env = std::getenv("LONGHAUL_NOISE_VECTORS"); env && *env) {
    return absl::StrSplit(env, ':', absl::SkipEmpty());
  }
  const std::string dir = LONGHAUL_NOISE_VECTORS_DIR;
  return {dir + "/noise_c_vectors.txt", dir + "/dissononce_vectors.txt",
          dir + "/flynn_noise_vectors.txt"};
}

bool PatternOf(const std::string& name, NoisePattern* p) {
  for (NoisePattern q : {NoisePattern::kIK, NoisePattern::kIKpsk1, NoisePattern::kNNpsk0}) {
    if (name == std::string("Noise_") + NoisePatternName(q) + "_25519_AESGCM_SHA256") {
      *p = q;
      return true;
    }
  }
  return false;
}

// The message as AES-256-GCM under `key` with Noise's nonce 0 (32 zero bits, then the
// counter 0 big-endian) and no associated data: what a Noise CipherState's first
// EncryptWithAd gives.
Bytes SealFirst(const Key32& key, const Bytes& plaintext) {
  absl::StatusOr<std::unique_ptr<Aead>> aead = Aead::Create(Cipher::kAes256Gcm, key);
  EXPECT_TRUE(aead.ok()) << aead.status();
  if (!aead.ok()) return {};
  const uint8_t nonce[kNonceSize] = {};
  Bytes out = plaintext;
  out.resize(plaintext.size() + kTagSize);
  EXPECT_TRUE((*aead)->Seal(nonce, {}, std::span<uint8_t>(out.data(), plaintext.size()),
                            out.data() + plaintext.size()));
  return out;
}

struct Sides {
  NoiseKeys initiator, responder;
  Key32 initiator_public{};
};

Sides KeysOf(const Vector& v, NoisePattern p) {
  Sides s;
  if (p != NoisePattern::kNNpsk0) {
    absl::StatusOr<KeyPair> i = KeyPairFromPrivate(Key(v.Get("init_static")));
    absl::StatusOr<KeyPair> r = KeyPairFromPrivate(Key(v.Get("resp_static")));
    EXPECT_TRUE(i.ok() && r.ok());
    s.initiator.static_key = *i;
    s.initiator.remote_static = r->public_key;
    s.responder.static_key = *r;
    s.initiator_public = i->public_key;
  }
  if (v.Has("preshared_key")) s.initiator.psk = s.responder.psk = Key(v.Get("preshared_key"));
  return s;
}

// Runs one vector through both our roles; every disagreement is a test failure.
void CheckVector(const Vector& v) {
  SCOPED_TRACE(v.file + ":" + std::to_string(v.line) + " " + v.Get("handshake"));
  NoisePattern p = NoisePattern::kIK;
  ASSERT_TRUE(PatternOf(v.Get("handshake"), &p)) << "not one of longhaul's handshakes";
  ASSERT_EQ(p != NoisePattern::kIK, v.Has("preshared_key"));
  for (const char* k : {"gen_init_ephemeral", "gen_resp_ephemeral", "msg_0_ciphertext",
                        "msg_1_ciphertext", "msg_2_ciphertext", "msg_3_ciphertext"}) {
    ASSERT_TRUE(v.Has(k)) << "the vector has no " << k;
  }
  const Sides keys = KeysOf(v, p);
  const Bytes prologue = FromHex(v.Get("prologue"));
  const Bytes msg0 = FromHex(v.Get("msg_0_ciphertext"));
  const Bytes msg1 = FromHex(v.Get("msg_1_ciphertext"));

  absl::StatusOr<NoiseHandshake> i = NoiseHandshake::Initiator(
      p, keys.initiator, prologue, Key(v.Get("gen_init_ephemeral")));
  absl::StatusOr<NoiseHandshake> r = NoiseHandshake::Responder(
      p, keys.responder, prologue, Key(v.Get("gen_resp_ephemeral")));
  ASSERT_TRUE(i.ok()) << i.status();
  ASSERT_TRUE(r.ok()) << r.status();

  // Our initiator writes the other implementation's message 1.
  absl::StatusOr<Bytes> m0 = i->WriteMessage1(FromHex(v.Get("msg_0_payload")));
  ASSERT_TRUE(m0.ok()) << m0.status();
  EXPECT_EQ(ToHex(*m0), v.Get("msg_0_ciphertext")) << "message 1 differs";

  // Our responder reads the other implementation's message 1.
  absl::StatusOr<Bytes> got0 = r->ReadMessage1(msg0);
  ASSERT_TRUE(got0.ok()) << got0.status();
  EXPECT_EQ(ToHex(*got0), v.Get("msg_0_payload"));
  if (p != NoisePattern::kNNpsk0) {
    ASSERT_TRUE(r->remote_static().has_value());
    EXPECT_EQ(*r->remote_static(), keys.initiator_public);
  } else {
    EXPECT_FALSE(r->remote_static().has_value());
  }

  // Our responder writes the other implementation's message 2.
  absl::StatusOr<Bytes> m1 = r->WriteMessage2(FromHex(v.Get("msg_1_payload")));
  ASSERT_TRUE(m1.ok()) << m1.status();
  EXPECT_EQ(ToHex(*m1), v.Get("msg_1_ciphertext")) << "message 2 differs";

  // Our initiator reads the other implementation's message 2.
  absl::StatusOr<Bytes> got1 = i->ReadMessage2(msg1);
  ASSERT_TRUE(got1.ok()) << got1.status();
  EXPECT_EQ(ToHex(*got1), v.Get("msg_1_payload"));

  const NoiseSplit si = i->Split();
  const NoiseSplit sr = r->Split();
  EXPECT_EQ(si.handshake_hash, sr.handshake_hash);
  EXPECT_EQ(si.initiator_to_responder, sr.initiator_to_responder);
  EXPECT_EQ(si.responder_to_initiator, sr.responder_to_initiator);
  if (v.Has("handshake_hash")) {
    EXPECT_EQ(ToHex(si.handshake_hash), v.Get("handshake_hash")) << "handshake hash differs";
  }
  // The split keys: the other implementation's first message in each direction.
  EXPECT_EQ(ToHex(SealFirst(si.initiator_to_responder, FromHex(v.Get("msg_2_payload")))),
            v.Get("msg_2_ciphertext"))
      << "initiator-to-responder key differs";
  EXPECT_EQ(ToHex(SealFirst(si.responder_to_initiator, FromHex(v.Get("msg_3_payload")))),
            v.Get("msg_3_ciphertext"))
      << "responder-to-initiator key differs";

  // The vector's messages, changed in one byte, do not authenticate with us; nor does
  // its message 1 under another pre-shared key.
  for (size_t at : {size_t{0}, msg0.size() / 2, msg0.size() - 1}) {
    Bytes bad = msg0;
    bad[at] ^= 0x01;
    absl::StatusOr<NoiseHandshake> r2 = NoiseHandshake::Responder(
        p, keys.responder, prologue, Key(v.Get("gen_resp_ephemeral")));
    ASSERT_TRUE(r2.ok());
    EXPECT_TRUE(absl::IsPermissionDenied(r2->ReadMessage1(bad).status())) << "byte " << at;
  }
  {
    Bytes bad = msg1;
    bad.back() ^= 0x01;
    absl::StatusOr<NoiseHandshake> i2 = NoiseHandshake::Initiator(
        p, keys.initiator, prologue, Key(v.Get("gen_init_ephemeral")));
    ASSERT_TRUE(i2.ok());
    ASSERT_TRUE(i2->WriteMessage1(FromHex(v.Get("msg_0_payload"))).ok());
    EXPECT_TRUE(absl::IsPermissionDenied(i2->ReadMessage2(bad).status()));
  }
  if (keys.responder.psk) {
    NoiseKeys wrong = keys.responder;
    (*wrong.psk)[0] ^= 0x01;
    absl::StatusOr<NoiseHandshake> r3 =
        NoiseHandshake::Responder(p, wrong, prologue, Key(v.Get("gen_resp_ephemeral")));
    ASSERT_TRUE(r3.ok());
    EXPECT_TRUE(absl::IsPermissionDenied(r3->ReadMessage1(msg0).status()));
  }
}

TEST(NoiseInterop, AgreesWithOtherImplementations) {
  std::map<std::string, int> per_source_pattern;
  int checked = 0;
  for (const std::string& file : VectorFiles()) {
    const std::vector<Vector> vectors = Load(file);
    EXPECT_FALSE(vectors.empty()) << file << " has no vectors";
    for (const Vector& v : vectors) {
      CheckVector(v);
      ++checked;
      ++per_source_pattern[file.substr(file.find_last_of('/') + 1) + " " + v.Get("handshake")];
    }
  }
  EXPECT_GT(checked, 0);
  if (std::getenv("LONGHAUL_NOISE_VECTORS") == nullptr) {
    // The committed files: every pattern longhaul uses comes from two sources, IK from
    // noise-c itself as well.
    EXPECT_EQ(per_source_pattern["noise_c_vectors.txt Noise_IK_25519_AESGCM_SHA256"], 3);
    for (const char* p : {"IK", "IKpsk1", "NNpsk0"}) {
      const std::string name = std::string(" Noise_") + p + "_25519_AESGCM_SHA256";
      EXPECT_EQ(per_source_pattern["dissononce_vectors.txt" + name], 2) << p;
      EXPECT_EQ(per_source_pattern["flynn_noise_vectors.txt" + name], 4) << p;
    }
  }
  for (const auto& [what, n] : per_source_pattern) std::cout << what << ": " << n << " vectors\n";
}

}  // namespace
}  // namespace longhaul::crypto
