// Runs the handshake fuzz target (handshake_fuzz.cc) as an ordinary test: over seeds (every
// handshake kind, with and without security fields, as bodies and as packets) and a
// bounded number of seeded random mutations of them; and over the committed corpus
// (tests/fuzz/corpus/handshake: these seeds and minimised inputs of fuzzing campaigns).
//
// To regenerate the seed files after an intended change of the handshake format:
//   LONGHAUL_WRITE_HANDSHAKE_CORPUS=tests/fuzz/corpus/handshake
//     build/tests/handshake_fuzz_replay_test

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"
#include "transport/endpoint/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace longhaul::endpoint {
namespace {

using Bytes = std::vector<uint8_t>;

std::vector<Bytes> Seeds() {
  std::vector<HandshakeMessage> msgs;
  HandshakeMessage hello;
  hello.kind = HandshakeKind::kHello;
  hello.client_cid = 0x1122334455667788ULL;
  hello.params.segment = 8192;
  hello.params.max_datagram = 8300;
  hello.params.recv_window = 1 << 30;
  hello.params.max_inflight_messages = 4096;
  hello.params.flows = 2;
  hello.params.idle_timeout_ms = 30000;
  hello.app_data = "tenant-a";
  msgs.push_back(hello);
  hello.cookie = Bytes(17, 0x5a);
  msgs.push_back(hello);
  hello.security.mode = 1;
  hello.security.ciphers = 3;
  hello.security.noise = Bytes(112, 0xa5);
  msgs.push_back(hello);
  msgs.push_back({.kind = HandshakeKind::kRetry, .client_cid = 9, .cookie = Bytes(17, 1)});
  HandshakeMessage accept = hello;
  accept.kind = HandshakeKind::kAccept;
  accept.cookie.clear();
  accept.server_cid = 77;
  accept.security.noise = Bytes(48, 0x3c);
  accept.security.ciphers = 1;
  msgs.push_back(accept);
  HandshakeMessage confirm{.kind = HandshakeKind::kConfirm, .client_cid = 9, .server_cid = 77};
  msgs.push_back(confirm);
  confirm.security.mode = 1;
  confirm.security.noise = Bytes(16, 0x99);
  msgs.push_back(confirm);
  msgs.push_back({.kind = HandshakeKind::kReject, .client_cid = 9, .reason = "server busy"});
  std::vector<Bytes> out;
  for (const HandshakeMessage& m : msgs) {
    absl::StatusOr<Bytes> body = EncodeHandshakeBody(m);
    EXPECT_TRUE(body.ok()) << body.status();
    out.push_back(*body);
    absl::StatusOr<Bytes> pkt = BuildHandshakePacket(m);
    EXPECT_TRUE(pkt.ok()) << pkt.status();
    out.push_back(*pkt);
  }
  return out;
}

TEST(HandshakeFuzzReplayTest, Seeds) {
  for (const Bytes& s : Seeds()) {
    Bytes copy = s;
    LLVMFuzzerTestOneInput(copy.data(), copy.size());
  }
}

std::string SeedName(size_t i) {
  char name[32];
  std::snprintf(name, sizeof(name), "seed_%02zu.bin", i);
  return name;
}

TEST(HandshakeFuzzReplayTest, MaybeWriteCorpus) {
  const char* dir = std::getenv("LONGHAUL_WRITE_HANDSHAKE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set LONGHAUL_WRITE_HANDSHAKE_CORPUS=<dir> to regenerate";
  std::filesystem::create_directories(dir);
  const std::vector<Bytes> seeds = Seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(std::filesystem::path(dir) / SeedName(i), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(seeds[i].data()),
              static_cast<std::streamsize>(seeds[i].size()));
    ASSERT_TRUE(out.good());
  }
}

// The committed corpus holds today's seeds (so a fuzzing campaign starts from them) and
// every input in it runs through the target.
TEST(HandshakeFuzzReplayTest, ReplayCorpus) {
  namespace fs = std::filesystem;
  const std::vector<Bytes> seeds = Seeds();
  size_t files = 0;
  // The seeds, and a campaign's finds below them (campaign/).
  for (const auto& e : fs::recursive_directory_iterator(LONGHAUL_HANDSHAKE_CORPUS_DIR)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    Bytes b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(e.path().string());
    const std::string name = e.path().filename().string();
    for (size_t i = 0; i < seeds.size(); ++i) {
      if (name == SeedName(i)) {
        EXPECT_EQ(b, seeds[i]) << name << " differs; regenerate it";
      }
    }
    b.shrink_to_fit();
    LLVMFuzzerTestOneInput(b.data(), b.size());
    ++files;
  }
  EXPECT_GE(files, seeds.size());
}

TEST(HandshakeFuzzReplayTest, BoundedRandomMutations) {
  const std::vector<Bytes> seeds = Seeds();
  Rng rng(20261201);
  for (int i = 0; i < 4000; ++i) {
    Bytes b = seeds[rng.Next() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng.Next() % 8);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      switch (rng.Next() % 4) {
        case 0:
          b[rng.Next() % b.size()] ^= static_cast<uint8_t>(1 << (rng.Next() % 8));
          break;
        case 1:
          b.resize(rng.Next() % b.size());
          break;
        case 2:
          b.insert(b.begin() + static_cast<long>(rng.Next() % b.size()),
                   static_cast<uint8_t>(rng.Next()));
          break;
        default:
          b[rng.Next() % b.size()] = static_cast<uint8_t>(rng.Next());
          break;
      }
    }
    Bytes copy = b;
    copy.shrink_to_fit();
    LLVMFuzzerTestOneInput(copy.data(), copy.size());
  }
}

}  // namespace
}  // namespace longhaul::endpoint
