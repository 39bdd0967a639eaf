// Runs the wire fuzz target (wire_fuzz.cc) as an ordinary test: over the committed seed
// corpus and over a bounded number of seeded random mutations of it. CI exercises the
// fuzz body this way on every compiler; the real libFuzzer run is described in
// docs/wire-format.md.
//
// To regenerate the committed corpus after an intended wire change:
//   LONGHAUL_WRITE_WIRE_CORPUS=tests/fuzz/corpus/wire build/tests/wire_fuzz_replay_test
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_replay.h"
#include "tests/fuzz/wire_seeds.h"
#include "transport/base/rng.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/packet.h"

namespace longhaul::wire::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path CorpusDir() { return fs::path(LONGHAUL_WIRE_CORPUS_DIR); }

// The writer's seeds by file name.
std::map<std::string, Bytes> Seeds() {
  const std::vector<std::pair<std::string, Bytes>> seeds = WireSeedPackets();
  return std::map<std::string, Bytes>(seeds.begin(), seeds.end());
}

// Runs the target on an exactly sized heap copy, as libFuzzer does.
using ::longhaul::fuzz::RunOne;

// The committed corpus, in name order; with_subdirs: also a campaign's finds in campaign/.
std::vector<Bytes> LoadCorpus(bool with_subdirs = false) {
  std::vector<Bytes> out;
  for (auto& [name, bytes] : ::longhaul::fuzz::LoadCorpus(CorpusDir().string(), with_subdirs)) {
    out.push_back(std::move(bytes));
  }
  return out;
}

TEST(WireFuzzReplayTest, MaybeWriteCorpus) {
  ::longhaul::fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_WIRE_CORPUS", Seeds());
}

// The committed corpus is exactly what the writer produces today: a change here is a
// change of wire format version 1 (see the versioning policy in docs/wire-format.md).
TEST(WireFuzzReplayTest, CommittedCorpusMatchesTheWriter) {
  ::longhaul::fuzz::ExpectCorpusHoldsSeeds(CorpusDir().string(), Seeds());
}

// The writer's seeds (the corpus also holds minimised fuzzing finds, most of them
// deliberately invalid).
TEST(WireFuzzReplayTest, SeedsAreValidPackets) {
  ASSERT_GE(LoadCorpus().size(), WireSeedPackets().size());
  for (const auto& [name, d] : WireSeedPackets()) {
    absl::StatusOr<PacketView> v = ParsePacket(d);
    ASSERT_TRUE(v.ok()) << v.status();
    FrameReader r(*v);
    Frame f;
    int frames = 0;
    for (int i = 0; i < 10000; ++i) {
      absl::StatusOr<bool> more = r.Next(&f);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      ++frames;
    }
    EXPECT_GT(frames, 0);
  }
}

TEST(WireFuzzReplayTest, ReplayCorpus) {
  for (const Bytes& d : LoadCorpus(/*with_subdirs=*/true)) RunOne(d);
  RunOne(Bytes{});
}

// One random edit of the kinds libFuzzer makes.
void Mutate(Rng& rng, Bytes& d) {
  switch (rng.UniformInt(8)) {
    case 0:  // flip a bit
      ::longhaul::fuzz::FlipBit(rng, d);
      break;
    case 1: {  // set a byte, often to an interesting value
      static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x3F, 0x40, 0x7F,
                                                 0x80, 0xBF, 0xC0, 0xFF};
      ::longhaul::fuzz::SetByte(rng, d, kInteresting, sizeof(kInteresting), 0.5);
      break;
    }
    case 2:  // insert random bytes
      ::longhaul::fuzz::InsertRandom(rng, d, 4000);
      break;
    case 3:  // erase a run
      ::longhaul::fuzz::EraseRun(rng, d);
      break;
    case 4:  // truncate
      ::longhaul::fuzz::Truncate(rng, d);
      break;
    case 5:  // duplicate a chunk (repeats frames)
      ::longhaul::fuzz::DuplicateChunk(rng, d, 64, 4000);
      break;
    case 6:  // write a varint-looking value
      if (d.size() >= 8) {
        const size_t at = rng.UniformInt(d.size() - 7);
        const uint64_t v = rng.Next();
        for (int i = 0; i < 8; ++i) d[at + i] = static_cast<uint8_t>(v >> (8 * i));
      }
      break;
    default:  // recompute the checksum so the frames are parsed
      if (d.size() >= kMinDatagramSize) {
        const size_t body = d.size() - kChecksumSize;
        const uint32_t crc = Crc32c(d.data(), body);
        for (int i = 0; i < 4; ++i) d[body + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
      }
      break;
  }
}

TEST(WireFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = LoadCorpus();
  ASSERT_FALSE(corpus.empty());
  ::longhaul::fuzz::RunMutationsWith(corpus, 0x5EED, 50000, Mutate,
                                     [](const Bytes&) { return false; });
}

}  // namespace
}  // namespace longhaul::wire::fuzz
