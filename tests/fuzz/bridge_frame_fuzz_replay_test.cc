// Runs the bridge fuzz target (bridge_frame_fuzz.cc) as an ordinary test: over the
// committed seed corpus (tests/fuzz/corpus/bridge: one frame of each type, forwards
// files) and a bounded number of seeded random mutations of it, some aimed at the
// frame header's fields and at the forwards syntax.
//
// To regenerate the committed corpus after an intended change of the frame format:
//   LONGHAUL_WRITE_BRIDGE_CORPUS=tests/fuzz/corpus/bridge build/tests/bridge_frame_fuzz_replay_test
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_replay.h"
#include "tools/bridge/bridge_config.h"
#include "tools/bridge/bridge_frames.h"
#include "transport/base/rng.h"

namespace longhaul::bridge {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path CorpusDir() { return fs::path(LONGHAUL_BRIDGE_CORPUS_DIR); }

Bytes ToBytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// The seeds, by file name: one frame of each type as the bridge writes it (*.bin) and
// forwards files (*.fwd).
std::map<std::string, Bytes> Seeds() {
  std::map<std::string, Bytes> s;
  s["open_default.bin"] = ToBytes(EncodeFrame(FrameType::kOpen, 1, 256 * 1024, "default"));
  s["open_long_name.bin"] = ToBytes(EncodeFrame(FrameType::kOpen, 0x0102030405060708ULL,
                                                32ULL << 20, std::string(kMaxForwardName, 'n')));
  Bytes data(kFrameHeaderSize);
  WriteFrameHeader(FrameType::kData, 1, 1, data.data());
  s["data_empty.bin"] = data;
  const std::string payload = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
  data.insert(data.end(), payload.begin(), payload.end());
  WriteFrameHeader(FrameType::kData, 3, 7, data.data());
  s["data_request.bin"] = data;
  s["fin.bin"] = ToBytes(EncodeFrame(FrameType::kFin, 3, 8));
  s["reset_refused.bin"] =
      ToBytes(EncodeFrame(FrameType::kReset, 5, static_cast<uint64_t>(ResetCode::kTargetRefused),
                          "target 127.0.0.1:5432: Connection refused"));
  s["reset_empty.bin"] =
      ToBytes(EncodeFrame(FrameType::kReset, 5, static_cast<uint64_t>(ResetCode::kAborted)));
  s["window.bin"] = ToBytes(EncodeFrame(FrameType::kWindow, 9, 8ULL << 20));
  s["goaway.bin"] =
      ToBytes(EncodeFrame(FrameType::kGoAway, 0, 0, "server bridge is shutting down"));
  s["forwards_client.fwd"] = ToBytes(
      "# client bridge: where to listen for each forward\n"
      "db 127.0.0.1:15432\n"
      "\n"
      "web\t0.0.0.0:8080   # all interfaces\n"
      "cache [::1]:6379\n");
  s["forwards_server.fwd"] = ToBytes(
      "# server bridge: the targets\r\n"
      "db db.internal:5432\r\n"
      "web 10.1.2.3:80\r\n"
      "cache localhost:6379\r\n");
  return s;
}

// The committed corpus, in name order; with_subdirs: also a campaign's finds in campaign/.
std::vector<Bytes> LoadCorpus(bool with_subdirs = false) {
  std::vector<Bytes> out;
  for (auto& [name, bytes] : ::longhaul::fuzz::LoadCorpus(CorpusDir().string(), with_subdirs)) {
    out.push_back(std::move(bytes));
  }
  return out;
}

// Runs the target on an exactly sized heap copy, as libFuzzer does.
using ::longhaul::fuzz::RunOne;

TEST(BridgeFrameFuzzReplayTest, MaybeWriteCorpus) {
  ::longhaul::fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_BRIDGE_CORPUS", Seeds());
}

// The committed corpus is what the encoder writes today.
TEST(BridgeFrameFuzzReplayTest, CommittedCorpusMatchesTheEncoder) {
  ::longhaul::fuzz::ExpectCorpusHoldsSeeds(CorpusDir().string(), Seeds());
}

TEST(BridgeFrameFuzzReplayTest, SeedsAreValid) {
  for (const auto& [name, bytes] : Seeds()) {
    if (absl::EndsWith(name, ".bin")) {
      absl::StatusOr<Frame> f = DecodeFrame(bytes);
      EXPECT_TRUE(f.ok()) << name << ": " << f.status();
    } else {
      absl::StatusOr<std::vector<Forward>> f = ParseForwards(
          absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name);
      ASSERT_TRUE(f.ok()) << name << ": " << f.status();
      EXPECT_EQ(f->size(), 3u) << name;
    }
  }
}

TEST(BridgeFrameFuzzReplayTest, ReplayCorpus) {
  const std::vector<Bytes> corpus = LoadCorpus(/*with_subdirs=*/true);
  ASSERT_GE(corpus.size(), Seeds().size());
  for (const Bytes& d : corpus) RunOne(d);
  RunOne(Bytes{});
}

// One random edit of the kinds libFuzzer makes, plus edits aimed at the frame header
// (type byte, the stream and value fields) and at forwards syntax.
void Mutate(Rng& rng, Bytes& d) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05,
                                             0x06, 0x07, 0x7F, 0x80, 0xFF};
  static constexpr char kSyntax[] = {' ', '\t', '\n', '\r', '#', ':', '[', ']', '0', '9', 'a', '.'};
  switch (rng.UniformInt(9)) {
    case 0:  // flip a bit
      ::longhaul::fuzz::FlipBit(rng, d);
      break;
    case 1:  // set a byte, often to an interesting value
      ::longhaul::fuzz::SetByte(rng, d, kInteresting, sizeof(kInteresting), 0.5);
      break;
    case 2:  // insert random bytes or forwards syntax
      if (d.size() < 4000) {
        const size_t at = rng.UniformInt(d.size() + 1);
        const size_t n = 1 + rng.UniformInt(8);
        Bytes ins(n);
        const bool syntax = rng.Bernoulli(0.5);
        for (auto& b : ins) {
          b = syntax ? static_cast<uint8_t>(kSyntax[rng.UniformInt(sizeof(kSyntax))])
                     : static_cast<uint8_t>(rng.Next());
        }
        d.insert(d.begin() + at, ins.begin(), ins.end());
      }
      break;
    case 3:  // erase a run
      ::longhaul::fuzz::EraseRun(rng, d);
      break;
    case 4:  // truncate
      ::longhaul::fuzz::Truncate(rng, d);
      break;
    case 5:  // duplicate a chunk (longer bodies, repeated lines)
      ::longhaul::fuzz::DuplicateChunk(rng, d, 512, 4000);
      break;
    case 6:  // a header field: stream (offset 1) or value (offset 9), big-endian
      if (d.size() >= kFrameHeaderSize) {
        const size_t at = rng.Bernoulli(0.5) ? 1 : 9;
        const uint64_t v = rng.Bernoulli(0.3) ? rng.UniformInt(3) : rng.Next();
        for (int i = 0; i < 8; ++i) d[at + i] = static_cast<uint8_t>(v >> (56 - 8 * i));
      }
      break;
    case 7:  // another type byte
      if (!d.empty()) d[0] = static_cast<uint8_t>(rng.UniformInt(8));
      break;
    default:  // grow or cut the body around the limits (255, 1024)
      if (d.size() >= kFrameHeaderSize) {
        static constexpr size_t kBodies[] = {0, 1, 254, 255, 256, 1023, 1024, 1025};
        d.resize(kFrameHeaderSize + kBodies[rng.UniformInt(std::size(kBodies))], 'b');
      }
      break;
  }
}

TEST(BridgeFrameFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = LoadCorpus();
  ASSERT_FALSE(corpus.empty());
  constexpr int kIterations = 30000;
  int frames = 0, forwards = 0;
  ::longhaul::fuzz::RunMutationsWith(corpus, 0xB41D6E, kIterations, Mutate, [&](const Bytes& d) {
    frames += DecodeFrame(d).ok();
    forwards +=
        ParseForwards(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()), "m")
            .ok();
    return false;
  });
  ::longhaul::fuzz::ExpectReached(kIterations,
                                  {{"frames decoded", frames, kIterations / 10},
                                   {"forwards files parsed", forwards, kIterations / 100}});
}

}  // namespace
}  // namespace longhaul::bridge
