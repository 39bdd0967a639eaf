// Runs the key-file fuzz target (key_files_fuzz.cc) as an ordinary test: over
// the committed corpus (tests/fuzz/corpus/key_files: a private key, public key
// and pre-shared key as longhaul-keygen writes them, peer-key lists with
// labels, comments and CRLF; minimised inputs of fuzzing campaigns) and a
// bounded number of seeded mutations of it.
//
// To regenerate the seeds after an intended change of the format:
//   LONGHAUL_WRITE_KEY_FILES_CORPUS=tests/fuzz/corpus/key_files
//     build/tests/key_files_fuzz_replay_test
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_replay.h"
#include "transport/crypto/key_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::crypto {
namespace {

using fuzz::Bytes;

Key32 Fixed(uint8_t v) {
  Key32 k;
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<uint8_t>(v + 17 * i);
  return k;
}

std::map<std::string, Bytes> Seeds() {
  std::map<std::string, Bytes> s;
  const KeyPair pair = *KeyPairFromPrivate(Fixed(1));
  s["rank0.key"] = fuzz::ToBytes(KeyFileText(pair.private_key));
  s["rank0.pub"] = fuzz::ToBytes(KeyFileText(pair.public_key));
  s["psk"] = fuzz::ToBytes(KeyFileText(Fixed(99)));
  std::string upper = absl::AsciiStrToUpper(KeyFileText(Fixed(5)));
  upper.insert(upper.size() - 1, "\r");
  s["upper_crlf.pub"] = fuzz::ToBytes(absl::StrCat("  ", upper));
  std::string peers = "# ranks this server allows\n";
  for (uint8_t r = 0; r < 4; ++r) {
    const KeyPair p = *KeyPairFromPrivate(Fixed(static_cast<uint8_t>(10 + r)));
    std::string hex = KeyFileText(p.public_key);
    hex.pop_back();
    absl::StrAppend(&peers, hex, r % 2 ? "\trank-" : " rank-", r,
                    r == 2 ? "  # spare\n" : "\n");
  }
  absl::StrAppend(&peers, "\n");
  s["peers"] = fuzz::ToBytes(peers);
  std::string crlf = absl::StrCat(KeyFileText(Fixed(20)), "# comment\r\n",
                                  KeyFileText(Fixed(21)));
  for (size_t i = 0; (i = crlf.find('\n', i)) != std::string::npos; i += 2)
    crlf.insert(i, "\r");
  s["peers_crlf"] = fuzz::ToBytes(crlf);
  return s;
}

TEST(KeyFilesFuzzReplayTest, MaybeWriteCorpus) {
  fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_KEY_FILES_CORPUS", Seeds());
}

TEST(KeyFilesFuzzReplayTest, CorpusHoldsEverySeedAndSeedsParse) {
  fuzz::ExpectCorpusHoldsSeeds(LONGHAUL_FUZZ_CORPUS_DIR, Seeds());
  for (const auto &[name, bytes] : Seeds()) {
    const std::string text(bytes.begin(), bytes.end());
    EXPECT_TRUE(ParsePeerKeyText(text, name).ok()) << name;
    if (name.rfind("peers", 0) != 0) {
      EXPECT_TRUE(ParseKeyText(text, name).ok()) << name;
    }
  }
  const Bytes peer_bytes = Seeds().at("peers");
  const std::string peers(peer_bytes.begin(), peer_bytes.end());
  absl::StatusOr<std::vector<PeerKey>> p = ParsePeerKeyText(peers, "peers");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  EXPECT_EQ((*p)[2].label, "rank-2");
  EXPECT_EQ((*p)[3].line, 5);
}

TEST(KeyFilesFuzzReplayTest, ReplayCorpus) {
  // A crash or a failed invariant aborts the program.
  EXPECT_GT(fuzz::ReplayCorpus(LONGHAUL_FUZZ_CORPUS_DIR), 0u);
}

TEST(KeyFilesFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = fuzz::CorpusInputs(LONGHAUL_FUZZ_CORPUS_DIR);
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dict = {
      "\n", "\r\n", " ", "\t", "#",          "\v",   "\f",
      "0",  "f",    "F", "g",  "-----BEGIN", "rank", std::string(1, '\0')};
  constexpr int kIterations = 20000;
  int keys = 0;
  const int lists = fuzz::RunMutations(
      corpus, dict, 0xC0FFEE, kIterations, [&](const Bytes &b) {
        const std::string t(b.begin(), b.end());
        keys += ParseKeyText(t, "k").ok() ? 1 : 0;
        return ParsePeerKeyText(t, "p").ok();
      });
  // A key is 64 exact hex digits, so most edits break it; a few percent still
  // parse.
  fuzz::ExpectReached(kIterations, {{"keys parsed", keys, kIterations / 200},
                                    {"peer lists parsed", lists, kIterations / 100}});
}

} // namespace
} // namespace longhaul::crypto
