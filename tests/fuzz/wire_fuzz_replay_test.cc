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
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_replay.h"
#include "tests/fuzz/wire_seeds.h"
#include "transport/base/rng.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/packet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace longhaul::wire::fuzz {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path CorpusDir() { return fs::path(LONGHAUL_WIRE_CORPUS_DIR); }

Bytes ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs the target on an exactly sized heap copy, as libFuzzer does.
void RunOne(const Bytes& input) {
  Bytes copy(input);
  copy.shrink_to_fit();
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
}

// The committed corpus, in name order; with_subdirs: also a campaign's finds in campaign/.
std::vector<Bytes> LoadCorpus(bool with_subdirs = false) {
  std::vector<Bytes> out;
  for (auto& [name, bytes] : ::longhaul::fuzz::LoadCorpus(CorpusDir().string(), with_subdirs)) {
    out.push_back(std::move(bytes));
  }
  return out;
}

TEST(WireFuzzReplayTest, MaybeWriteCorpus) {
  const char* dir = std::getenv("LONGHAUL_WRITE_WIRE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set LONGHAUL_WRITE_WIRE_CORPUS=<dir> to regenerate";
  fs::create_directories(dir);
  for (const auto& [name, bytes] : WireSeedPackets()) {
    std::ofstream out(fs::path(dir) / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << name;
  }
}

// The committed corpus is exactly what the writer produces today: a change here is a
// change of wire format version 1 (see the versioning policy in docs/wire-format.md).
TEST(WireFuzzReplayTest, CommittedCorpusMatchesTheWriter) {
  for (const auto& [name, bytes] : WireSeedPackets()) {
    const fs::path p = CorpusDir() / name;
    ASSERT_TRUE(fs::exists(p)) << p << " is missing; regenerate the corpus";
    EXPECT_EQ(ReadFile(p), bytes) << name << " differs from what PacketWriter produces";
  }
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
      if (!d.empty()) d[rng.UniformInt(d.size())] ^= static_cast<uint8_t>(1u << rng.UniformInt(8));
      break;
    case 1:  // set a byte, often to an interesting value
      if (!d.empty()) {
        static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x3F, 0x40, 0x7F,
                                                   0x80, 0xBF, 0xC0, 0xFF};
        d[rng.UniformInt(d.size())] = rng.Bernoulli(0.5)
                                          ? kInteresting[rng.UniformInt(sizeof(kInteresting))]
                                          : static_cast<uint8_t>(rng.Next());
      }
      break;
    case 2:  // insert random bytes
      if (d.size() < 4000) {
        const size_t at = rng.UniformInt(d.size() + 1);
        const size_t n = 1 + rng.UniformInt(8);
        Bytes ins(n);
        for (auto& b : ins) b = static_cast<uint8_t>(rng.Next());
        d.insert(d.begin() + at, ins.begin(), ins.end());
      }
      break;
    case 3:  // erase a run
      if (!d.empty()) {
        const size_t at = rng.UniformInt(d.size());
        const size_t n = std::min<size_t>(1 + rng.UniformInt(16), d.size() - at);
        d.erase(d.begin() + at, d.begin() + at + n);
      }
      break;
    case 4:  // truncate
      d.resize(rng.UniformInt(d.size() + 1));
      break;
    case 5:  // duplicate a chunk (repeats frames)
      if (!d.empty() && d.size() < 4000) {
        const size_t at = rng.UniformInt(d.size());
        const size_t n = std::min<size_t>(1 + rng.UniformInt(64), d.size() - at);
        Bytes chunk(d.begin() + at, d.begin() + at + n);
        d.insert(d.begin() + rng.UniformInt(d.size() + 1), chunk.begin(), chunk.end());
      }
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
  Rng rng(0x5EED);
  constexpr int kIterations = 50000;
  for (int i = 0; i < kIterations; ++i) {
    Bytes d = corpus[rng.UniformInt(corpus.size())];
    const int edits = 1 + static_cast<int>(rng.UniformInt(6));
    for (int e = 0; e < edits; ++e) Mutate(rng, d);
    RunOne(d);
  }
}

}  // namespace
}  // namespace longhaul::wire::fuzz
