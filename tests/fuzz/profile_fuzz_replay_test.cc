// Runs the profile fuzz target (profile_fuzz.cc) as an ordinary test: over the
// committed corpus (tests/fuzz/corpus/profile: the repository's
// profiles/*.profile, a profile with the security keys, and minimised inputs of
// fuzzing campaigns) and a bounded number of seeded mutations of it.
//
// To refresh the seeds after profiles/ changed:
//   LONGHAUL_WRITE_PROFILE_CORPUS=tests/fuzz/corpus/profile
//   build/tests/profile_fuzz_replay_test
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/fuzz/fuzz_replay.h"
#include "transport/profile/profile.h"
#include "transport/profile/profile_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul {
namespace {

using fuzz::Bytes;

std::string Text(const Bytes &b) { return std::string(b.begin(), b.end()); }

// The seeds: every profiles/*.profile, and one with the packet-protection keys.
std::map<std::string, Bytes> Seeds() {
  std::map<std::string, Bytes> s;
  for (const auto &[name, bytes] : fuzz::LoadCorpus(LONGHAUL_PROFILES_DIR)) {
    if (absl::EndsWith(name, ".profile"))
      s[name] = bytes;
  }
  s["security-keys.profile"] =
      fuzz::ToBytes("# a tool's profile with its keys (docs/security.md)\n"
                    "window=256MiB\r\n"
                    "key = keys/rank0.key   # this side\n"
                    "peer_key=/etc/longhaul/peers\n"
                    "psk_file=psk\n"
                    "insecure=no\n"
                    "mtu=9000\n"
                    "fec=auto\n");
  return s;
}

// What LoadProfileFile does with the text.
bool Loads(const Bytes &b) {
  std::string rest;
  absl::StatusOr<ProfileSecurity> sec =
      SplitProfileSecurity(Text(b), "t", "/d", &rest);
  return sec.ok() && ParseProfile(rest, TransportConfig{}, "t").ok();
}

TEST(ProfileFuzzReplayTest, MaybeWriteCorpus) {
  fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_PROFILE_CORPUS", Seeds());
}

TEST(ProfileFuzzReplayTest, CorpusHoldsEverySeedAndSeedsLoad) {
  const std::map<std::string, Bytes> seeds = Seeds();
  ASSERT_GE(seeds.size(), 2u);
  fuzz::ExpectCorpusHoldsSeeds(LONGHAUL_FUZZ_CORPUS_DIR, seeds);
  for (const auto &[name, bytes] : seeds) {
    EXPECT_TRUE(Loads(bytes)) << name;
  }
}

TEST(ProfileFuzzReplayTest, ReplayCorpus) {
  // A crash or a failed invariant aborts the program.
  EXPECT_GT(fuzz::ReplayCorpus(LONGHAUL_FUZZ_CORPUS_DIR), 0u);
}

TEST(ProfileFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = fuzz::CorpusInputs(LONGHAUL_FUZZ_CORPUS_DIR);
  ASSERT_FALSE(corpus.empty());
  std::vector<std::string> dict = {
      "\n",  "=",    "#",   " ",   "\r\n", "0",   "1",    "k",    "%",
      "ms",  "us",   "s",   "KiB", "MiB",  "GiB", "gbit", "mbit", "fixed",
      "bbr", "auto", "off", "on",  "yes",  ",",   "."};
  for (const std::string &k : ProfileKeys())
    dict.push_back("\n" + k + "=");
  for (const char *k : {"\nkey=", "\npeer_key=", "\npsk_file=", "\ninsecure="})
    dict.push_back(k);
  constexpr int kIterations = 20000;
  const int loaded =
      fuzz::RunMutations(corpus, dict, 0x9F0F11E, kIterations, Loads);
  std::printf("mutated profiles: %d of %d loaded\n", loaded, kIterations);
  // The mutations keep reaching the accepting path, not only the first refusal.
  EXPECT_GT(loaded, kIterations / 50);
}

} // namespace
} // namespace longhaul
