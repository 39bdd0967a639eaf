// Micro-benchmarks of packet protection (Google Benchmark), per core:
//
//   BM_Seal   PacketProtector::Seal of a packet of `bytes` (header + frames + tag room):
//             the AEAD over the frames, the tag, header protection
//   BM_Open   PacketProtector::Open of such a packet (unmask, replay window, AEAD)
//   BM_Crc32c the CRC32C a plaintext packet costs instead (ISA-L), for comparison
//   BM_Handshake  one complete Noise IK exchange (both sides: 4 X25519 on each)
//
// Args: {cipher (1 AES-256-GCM, 2 ChaCha20-Poly1305), bytes}. Throughput is bytes of
// packet per second. Run: <build>/bin/longhaul-crypto-bench (Release build).
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "tools/common/tool_flags.h"
#include "transport/crypto/noise.h"
#include "transport/crypto/packet_protection.h"
#include "transport/wire/crc32c.h"

namespace longhaul::crypto {
namespace {

NoiseSplit TestSplit() {
  NoiseSplit s;
  s.initiator_to_responder.fill(0x11);
  s.responder_to_initiator.fill(0x22);
  s.handshake_hash.fill(0x33);
  return s;
}

std::vector<uint8_t> Packet(size_t bytes, uint64_t pn) {
  std::vector<uint8_t> p(bytes, 0x5a);
  p[0] = 1;
  p[1] = 0;
  for (int i = 0; i < 8; ++i) p[12 + i] = static_cast<uint8_t>(pn >> (8 * (7 - i)));
  return p;
}

void BM_Seal(benchmark::State& state) {
  const auto cipher = static_cast<Cipher>(state.range(0));
  const size_t bytes = static_cast<size_t>(state.range(1));
  KeyUpdatePolicy policy;
  policy.max_packets = uint64_t{1} << 62;
  auto a = *PacketProtector::Create(cipher, TestSplit(), true, policy, Time::Zero());
  std::vector<uint8_t> p = Packet(bytes, 0);
  uint64_t pn = 0;
  for (auto _ : state) {
    p[1] = 0;
    for (int i = 0; i < 8; ++i) p[12 + i] = static_cast<uint8_t>(pn >> (8 * (7 - i)));
    a->Seal(Time::Zero(), p, -1);
    benchmark::DoNotOptimize(p.data());
    ++pn;
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void BM_Open(benchmark::State& state) {
  const auto cipher = static_cast<Cipher>(state.range(0));
  const size_t bytes = static_cast<size_t>(state.range(1));
  KeyUpdatePolicy policy;
  policy.max_packets = uint64_t{1} << 62;
  auto a = *PacketProtector::Create(cipher, TestSplit(), true, policy, Time::Zero());
  auto b = *PacketProtector::Create(cipher, TestSplit(), false, policy, Time::Zero());
  // A ring of sealed packets, re-sealed with fresh numbers outside the timed region.
  constexpr size_t kRing = 1024;
  std::vector<std::vector<uint8_t>> ring;
  uint64_t pn = 0;
  auto refill = [&] {
    ring.clear();
    for (size_t i = 0; i < kRing; ++i) {
      ring.push_back(Packet(bytes, pn++));
      a->Seal(Time::Zero(), ring.back(), -1);
    }
  };
  refill();
  size_t i = 0;
  size_t n = 0;
  for (auto _ : state) {
    if (i == kRing) {
      state.PauseTiming();
      refill();
      i = 0;
      state.ResumeTiming();
    }
    if (b->Open(Time::Zero(), ring[i++], &n) != PacketProtector::OpenResult::kOk) {
      state.SkipWithError("open failed");
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void BM_Crc32c(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(1));
  std::vector<uint8_t> p = Packet(bytes, 0);
  for (auto _ : state) benchmark::DoNotOptimize(wire::Crc32c(p.data(), p.size() - 4));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void BM_Handshake(benchmark::State& state) {
  NoiseKeys ck, sk;
  Key32 c, s, e1, e2;
  c.fill(1);
  s.fill(2);
  e1.fill(3);
  e2.fill(4);
  ck.static_key = *KeyPairFromPrivate(c);
  sk.static_key = *KeyPairFromPrivate(s);
  ck.remote_static = sk.static_key->public_key;
  for (auto _ : state) {
    auto i = *NoiseHandshake::Initiator(NoisePattern::kIK, ck, {}, e1);
    auto r = *NoiseHandshake::Responder(NoisePattern::kIK, sk, {}, e2);
    auto m1 = *i.WriteMessage1({});
    benchmark::DoNotOptimize(r.ReadMessage1(m1));
    auto m2 = *r.WriteMessage2({});
    benchmark::DoNotOptimize(i.ReadMessage2(m2));
  }
}

BENCHMARK(BM_Seal)->Args({1, 1500})->Args({1, 8972})->Args({2, 1500})->Args({2, 8972});
BENCHMARK(BM_Open)->Args({1, 1500})->Args({1, 8972})->Args({2, 1500})->Args({2, 8972});
BENCHMARK(BM_Crc32c)->Args({0, 1500})->Args({0, 8972});
BENCHMARK(BM_Handshake);

}  // namespace
}  // namespace longhaul::crypto

int main(int argc, char** argv) {
  longhaul::ExitIfVersionRequested(argc, argv, "longhaul-crypto-bench");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
