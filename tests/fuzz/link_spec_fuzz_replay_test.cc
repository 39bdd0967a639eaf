// Runs the link-spec fuzz target (link_spec_fuzz.cc) as an ordinary test: over
// the committed corpus (tests/fuzz/corpus/link_spec: each
// profiles/links/NAME.link used by name, with overrides and a schedule; a
// nested name; a spec of every key; minimised inputs of fuzzing campaigns) and
// a bounded number of seeded mutations of it.
//
// Input layout (see link_spec_fuzz.cc):
// "SPEC\0SCHEDULE\0NAME\nTEXT\0NAME\nTEXT...".
//
// To refresh the seeds after profiles/links changed:
//   LONGHAUL_WRITE_LINK_SPEC_CORPUS=tests/fuzz/corpus/link_spec
//     build/tests/link_spec_fuzz_replay_test
#include "absl/strings/string_view.h"
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/fuzz/fuzz_replay.h"
#include "transport/sim/link_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::sim {
namespace {

using fuzz::Bytes;

std::string Part(absl::string_view name, const Bytes &text) {
  return absl::StrCat(name, "\n", std::string(text.begin(), text.end()));
}

Bytes Input(absl::string_view spec, absl::string_view schedule,
            const std::vector<std::string> &named) {
  std::string s = absl::StrCat(spec, absl::string_view("\0", 1), schedule);
  for (const std::string &n : named)
    absl::StrAppend(&s, absl::string_view("\0", 1), n);
  return fuzz::ToBytes(s);
}

std::map<std::string, Bytes> Seeds() {
  std::map<std::string, Bytes> s;
  for (const auto &[file, text] : fuzz::LoadCorpus(LONGHAUL_LINKS_DIR)) {
    if (!absl::EndsWith(file, ".link"))
      continue;
    const std::string name(absl::StripSuffix(file, ".link"));
    s[name + ".in"] =
        Input(name, "2s:rate=500mbit,4s:loss=1e-3,burst=2", {Part(name, text)});
    s[name + "-override.in"] =
        Input(absl::StrCat(name, ",loss=1e-4,jitter=1ms,queue=20ms"), "",
              {Part(name, text)});
  }
  s["every-key.in"] = Input(
      "rate=10gbit,rtt=58ms,jitter=200us,loss=0.1%,burst=3,reorder=1e-3,"
      "reorder_delay=2ms,"
      "dup=1e-5,corrupt=1e-6,queue=32MB,ecn=4MB,mtu=1500,overhead=48,seed=42",
      "1s:rate=5gbit;1500ms:rtt=80ms,queue=10ms,ecn=1ms;3s:mtu=1400,reorder=0,"
      "dup=0,corrupt=0",
      {});
  s["nested.in"] = Input(
      "outer,seed=1", "250ms:loss=0",
      {"outer\nmiddle # comment\nrtt=10ms", "middle\nrate=1gbit\nloss=1e-5"});
  s["self-nested.in"] = Input("loop", "", {"loop\nloop,rate=1gbit"});
  return s;
}

bool SpecParses(const Bytes &b) {
  const std::string text(b.begin(), b.end());
  const std::vector<absl::string_view> parts =
      absl::StrSplit(text, absl::string_view("\0", 1));
  if (parts.empty())
    return false;
  return ParseLinkSpec(
             parts[0],
             [&](absl::string_view name) -> absl::StatusOr<NamedLink> {
               for (size_t i = 2; i < parts.size(); ++i) {
                 const size_t nl = parts[i].find('\n');
                 if (nl != absl::string_view::npos &&
                     parts[i].substr(0, nl) == name) {
                   return NamedLink{std::string(parts[i].substr(nl + 1)), "t"};
                 }
               }
               return absl::NotFoundError("no such link");
             })
      .ok();
}

bool ScheduleParses(const Bytes &b) {
  const std::string text(b.begin(), b.end());
  const std::vector<absl::string_view> parts =
      absl::StrSplit(text, absl::string_view("\0", 1));
  return parts.size() > 1 && !parts[1].empty() &&
         ParseLinkSchedule(parts[1]).ok();
}

TEST(LinkSpecFuzzReplayTest, MaybeWriteCorpus) {
  fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_LINK_SPEC_CORPUS", Seeds());
}

TEST(LinkSpecFuzzReplayTest, CorpusHoldsEverySeedAndSeedsParse) {
  const std::map<std::string, Bytes> seeds = Seeds();
  ASSERT_GE(seeds.size(), 10u); // the repository has several named links
  fuzz::ExpectCorpusHoldsSeeds(LONGHAUL_FUZZ_CORPUS_DIR, seeds);
  for (const auto &[name, bytes] : seeds) {
    EXPECT_EQ(SpecParses(bytes), name != "self-nested.in") << name;
  }
  EXPECT_TRUE(ScheduleParses(seeds.at("every-key.in")));
  EXPECT_TRUE(ScheduleParses(seeds.at("nested.in")));
}

TEST(LinkSpecFuzzReplayTest, ReplayCorpus) {
  // A crash or a failed invariant aborts the program.
  EXPECT_GT(fuzz::ReplayCorpus(LONGHAUL_FUZZ_CORPUS_DIR), 0u);
}

TEST(LinkSpecFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = fuzz::CorpusInputs(LONGHAUL_FUZZ_CORPUS_DIR);
  ASSERT_FALSE(corpus.empty());
  std::vector<std::string> dict = {
      ",",  "=",   ":",    ";",    "#",    "\n", std::string(1, '\0'),
      "0",  "1",   "e-3",  "%",    ".5",   "ns", "us",
      "ms", "s",   "gbit", "mbit", "kbit", "B",  "KB",
      "MB", "KiB", "inf",  "nan"};
  for (const std::string &k : LinkSpecKeys())
    dict.push_back("," + k + "=");
  constexpr int kIterations = 20000;
  int schedules = 0;
  const int specs = fuzz::RunMutations(corpus, dict, 0x11A4C, kIterations,
                                       [&](const Bytes &b) {
                                         schedules += ScheduleParses(b) ? 1 : 0;
                                         return SpecParses(b);
                                       });
  fuzz::ExpectReached(kIterations, {{"specs parsed", specs, kIterations / 20},
                                    {"schedules parsed", schedules, kIterations / 50}});
}

} // namespace
} // namespace longhaul::sim
