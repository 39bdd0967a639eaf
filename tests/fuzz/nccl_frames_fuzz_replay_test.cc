// Runs the NCCL plugin fuzz target (nccl_frames_fuzz.cc) as an ordinary test:
// over the committed corpus (tests/fuzz/corpus/nccl_frames: a frame of each
// kind as the plugin writes it, handles with and without a key, an environment;
// minimised inputs of fuzzing campaigns) and a bounded number of seeded
// mutations of it.
//
// To regenerate the seeds after an intended change of the formats:
//   LONGHAUL_WRITE_NCCL_FRAMES_CORPUS=tests/fuzz/corpus/nccl_frames
//     build/tests/nccl_frames_fuzz_replay_test
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_replay.h"
#include "transport/nccl/frames.h"
#include "transport/nccl/plugin_handle.h"
#include "transport/nccl/settings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace longhaul::nccl {
namespace {

using fuzz::Bytes;

Bytes Frame(FrameKind kind, uint32_t comm, int32_t tag, uint64_t value,
            uint64_t instance, const std::string &payload = "") {
  Bytes b(kFrameHeaderBytes);
  EncodeFrameHeader(MakeFrameHeader(kind, comm, tag, value, instance),
                    b.data());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes Open(uint32_t comm, uint64_t listen_id, uint64_t instance, const OpenBody &body) {
  Bytes b = Frame(FrameKind::kOpen, comm, 0, listen_id, instance);
  b.resize(kOpenFrameBytes);
  EncodeOpenBody(body, b.data() + kFrameHeaderBytes);
  return b;
}

Bytes Handle(const std::string &address, bool key) {
  PluginHandle h;
  h.address = address;
  h.port = 43210;
  h.instance = 0x0123456789abcdefULL;
  h.listen_id = 0x9e3779b97f4a7c15ULL;
  h.credit = 64ULL << 20;
  if (key) {
    h.public_key.emplace();
    for (size_t i = 0; i < 32; ++i)
      (*h.public_key)[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  Bytes b(kHandleBytes);
  EXPECT_TRUE(EncodeHandle(h, b.data()).ok());
  return b;
}

std::map<std::string, Bytes> Seeds() {
  std::map<std::string, Bytes> s;
  s["open.bin"] = Open(1, 0x9e3779b97f4a7c15ULL, 0xfeedfacecafebeefULL,
                       OpenBody{true, 0x0123456789abcdefULL});
  s["open_no_comm_id.bin"] = Open(2, 0x243f6a8885a308d3ULL, 0xfeedfacecafebeefULL, OpenBody{});
  s["data.bin"] = Frame(FrameKind::kData, 1, 5, 11, 0, "hello nccl!");
  s["data_head.bin"] = Frame(FrameKind::kDataHead, 2, -1, 1ULL << 30, 0);
  s["credit.bin"] = Frame(FrameKind::kCredit, 1, 0, 123456789, 0);
  s["close.bin"] = Frame(FrameKind::kClose, 1, 0, 0, 0);
  s["reject.bin"] = Frame(FrameKind::kReject, 4, 0, 7, 0);
  s["reject_credit.bin"] =
      Frame(FrameKind::kReject, 5, static_cast<int32_t>(RejectReason::kCreditExceeded), 7, 0);
  s["handle_v4_key.bin"] = Handle("198.18.0.1", true);
  s["handle_v6.bin"] = Handle("fd00::1", false);
  s["env.txt"] = fuzz::ToBytes(
      "CREDIT=64MiB\nCOPY_MAX=512KiB\nLINGER=2s\nCONNECT_TIMEOUT=5s\nPORT="
      "5000\nSPIN=10us\n"
      "ADVERTISE=198.18.0.2:6000\nINSECURE=1\nDATAPATH=udp\nIFNAME=^lo,eth\n"
      "WINDOW=256MiB\nRATE=10gbit\nFEC=32,4\nKEY=/keys/r0.key");
  s["advertise_v6.txt"] = fuzz::ToBytes("[fd00::2]:7000");
  return s;
}

TEST(NcclFramesFuzzReplayTest, MaybeWriteCorpus) {
  fuzz::MaybeWriteCorpus("LONGHAUL_WRITE_NCCL_FRAMES_CORPUS", Seeds());
}

// The committed seeds are what the encoders write today, and they decode.
TEST(NcclFramesFuzzReplayTest, CorpusHoldsEverySeedAndSeedsDecode) {
  const std::map<std::string, Bytes> seeds = Seeds();
  fuzz::ExpectCorpusHoldsSeeds(LONGHAUL_FUZZ_CORPUS_DIR, seeds);
  for (const char *f : {"open.bin", "open_no_comm_id.bin", "data.bin", "data_head.bin",
                        "credit.bin", "close.bin", "reject.bin", "reject_credit.bin"}) {
    const Bytes &b = seeds.at(f);
    EXPECT_TRUE(DecodeFrameHeader(b.data(), b.size()).ok()) << f;
  }
  for (const char *f : {"open.bin", "open_no_comm_id.bin"}) {
    const Bytes &b = seeds.at(f);
    EXPECT_TRUE(DecodeOpenBody(b.data(), b.size()).ok()) << f;
  }
  EXPECT_TRUE(DecodeHandle(seeds.at("handle_v4_key.bin").data()).ok());
  EXPECT_TRUE(DecodeHandle(seeds.at("handle_v6.bin").data()).ok());
  const Bytes &env = seeds.at("env.txt");
  std::vector<std::string> lines;
  std::string cur;
  for (uint8_t c : env) {
    if (c == '\n') {
      lines.push_back("NCCL_LONGHAUL_" + cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(c));
    }
  }
  lines.push_back("NCCL_LONGHAUL_" + cur);
  std::vector<const char *> envp;
  for (const std::string &l : lines)
    envp.push_back(l.c_str());
  envp.push_back(nullptr);
  absl::StatusOr<Settings> s = ReadSettings(envp.data());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->credit, 64ULL << 20);
  EXPECT_EQ(s->advertise, "198.18.0.2:6000");
}

TEST(NcclFramesFuzzReplayTest, ReplayCorpus) {
  // A crash or a failed invariant aborts the program.
  EXPECT_GT(fuzz::ReplayCorpus(LONGHAUL_FUZZ_CORPUS_DIR), 0u);
}

TEST(NcclFramesFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> corpus = fuzz::CorpusInputs(LONGHAUL_FUZZ_CORPUS_DIR);
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> dict = {std::string("LHNF", 4),
                                         std::string("LHN1", 4),
                                         std::string(1, '\x01'),
                                         std::string(1, '\x06'),
                                         "=",
                                         "\n",
                                         ":",
                                         "[",
                                         "]",
                                         "::",
                                         "198.18.0.1",
                                         "65535",
                                         "0",
                                         "KiB",
                                         "GiB",
                                         "ms",
                                         "CREDIT=",
                                         "ADVERTISE=",
                                         "INSECURE=",
                                         "DATAPATH=",
                                         "WINDOW="};
  constexpr int kIterations = 20000;
  int handles = 0;
  const int frames = fuzz::RunMutations(
      corpus, dict, 0x4CC1, kIterations, [&](const Bytes &b) {
        Bytes h(kHandleBytes, 0);
        if (!b.empty()) std::memcpy(h.data(), b.data(), std::min(b.size(), kHandleBytes));
        handles += DecodeHandle(h.data()).ok() ? 1 : 0;
        return DecodeFrameHeader(b.data(), b.size()).ok();
      });
  fuzz::ExpectReached(kIterations, {{"frames decoded", frames, kIterations / 20},
                                    {"handles decoded", handles, kIterations / 100}});
}

} // namespace
} // namespace longhaul::nccl
