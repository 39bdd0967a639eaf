// Micro-benchmarks of the FEC codec (Google Benchmark).
//
// Throughput is reported as bytes of SOURCE data per second on one core:
// SetBytesProcessed(k * shard bytes) per iteration, whatever is being measured (encode
// or decode), so encode and decode numbers are comparable per delivered byte.
//
//   BM_EncodeStreaming   BlockEncoder: Begin, k x AddDataShard, Finish (the sender path)
//   BM_EncodeStreamingPackets  the same with packet-shaped shards: 8-byte packet number +
//                        frames as two pieces, length not a multiple of 64
//   BM_EncodeOneShot     FecCodec::Encode over k ready shards (ec_encode_data)
//   BM_DecodeCached      BlockDecoder: add k - m data + m parity shards, Recover m lost
//                        data shards, tables from the cache (the receiver path)
//   BM_ReconstructCached FecCodec::Reconstruct alone (no shard copies), m data shards lost
//   BM_DecodeTableBuild  an uncached decode-table build for m lost data shards (matrix
//                        inversion + table expansion); time per build
//   BM_FullInversionMatrix the generic k x k inversion recipe, for comparison
//   BM_ChooseFecParameters one auto-policy decision
//
// Args: {k, m, shard bytes}. Run: <build>/bin/longhaul-fec-bench (Release build).
#include <cstring>
#include <span>
#include <vector>

#include "benchmark/benchmark.h"
#include "tools/common/tool_flags.h"
#include "transport/base/rng.h"
#include "transport/fec/block_decoder.h"
#include "transport/fec/block_encoder.h"
#include "transport/fec/cauchy_code.h"
#include "transport/fec/fec_codec.h"
#include "transport/fec/fec_policy.h"

namespace longhaul::fec {
namespace {

std::vector<std::vector<uint8_t>> Shards(int count, size_t len, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<uint8_t>> s(count, std::vector<uint8_t>(len));
  for (auto& v : s) {
    for (auto& b : v) b = static_cast<uint8_t>(rng.Next());
  }
  return s;
}

void BM_EncodeStreaming(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  FecCodec codec;
  ShardPool pool(len);
  BlockEncoder enc(&codec, &pool);
  const auto data = Shards(k, len, 1);
  uint64_t block = 0;
  for (auto _ : state) {
    if (!enc.Begin(block++, k, m).ok()) state.SkipWithError("Begin");
    for (int j = 0; j < k; ++j) {
      if (!enc.AddDataShard(j, data[j].data(), len).ok()) state.SkipWithError("Add");
    }
    auto parity = enc.Finish(k);
    benchmark::DoNotOptimize(parity->shard(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

// The transport's shape: each shard is an 8-byte packet number plus `shard - 8` bytes of
// frames (shard need not be a multiple of 64), passed as two pieces.
void BM_EncodeStreamingPackets(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  FecCodec codec;
  ShardPool pool(len);
  BlockEncoder enc(&codec, &pool);
  const auto frames = Shards(k, len - 8, 7);
  const uint8_t pn[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint64_t block = 0;
  for (auto _ : state) {
    if (!enc.Begin(block++, k, m).ok()) state.SkipWithError("Begin");
    for (int j = 0; j < k; ++j) {
      const std::span<const uint8_t> parts[2] = {std::span<const uint8_t>(pn, 8),
                                                 std::span<const uint8_t>(frames[j])};
      if (!enc.AddDataShardParts(j, parts).ok()) state.SkipWithError("Add");
    }
    auto parity = enc.Finish(k);
    benchmark::DoNotOptimize(parity->shard(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

void BM_EncodeOneShot(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  FecCodec codec;
  const auto data = Shards(k, len, 2);
  auto parity = Shards(m, len, 3);
  std::vector<const uint8_t*> d(k);
  std::vector<uint8_t*> p(m);
  for (int j = 0; j < k; ++j) d[j] = data[j].data();
  for (int r = 0; r < m; ++r) p[r] = parity[r].data();
  for (auto _ : state) {
    if (!codec.Encode(k, m, len, d.data(), p.data()).ok()) state.SkipWithError("Encode");
    benchmark::DoNotOptimize(p[0][0]);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

// A (k, m) block and its parity, for the decode benchmarks.
struct EncodedBlock {
  std::vector<std::vector<uint8_t>> data, parity;
  EncodedBlock(FecCodec& codec, int k, int m, size_t len) {
    data = Shards(k, len, 4);
    parity = Shards(m, len, 5);
    std::vector<const uint8_t*> d(k);
    std::vector<uint8_t*> p(m);
    for (int j = 0; j < k; ++j) d[j] = data[j].data();
    for (int r = 0; r < m; ++r) p[r] = parity[r].data();
    (void)codec.Encode(k, m, len, d.data(), p.data());
  }
};

void BM_DecodeCached(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  FecCodec codec;
  ShardPool pool(len);
  BlockDecoder dec(&codec, &pool);
  EncodedBlock blk(codec, k, m, len);
  // Lose the first m data shards, spread over the block (worst case: all parity used).
  std::vector<bool> lost(k, false);
  for (int i = 0; i < m; ++i) lost[(i * k) / m] = true;
  uint64_t block = 0;
  for (auto _ : state) {
    dec.Begin(block++);
    for (int j = 0; j < k; ++j) {
      if (!lost[j]) (void)dec.AddShard(ShardInfo::Data(j, k, m), blk.data[j].data(), len);
    }
    for (int r = 0; r < m; ++r) {
      (void)dec.AddShard(ShardInfo::Parity(r, k, m), blk.parity[r].data(), len);
    }
    auto rec = dec.Recover();
    if (!rec.ok() || static_cast<int>(rec->size()) != m) state.SkipWithError("Recover");
    benchmark::DoNotOptimize(rec->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
  state.counters["table_builds"] = static_cast<double>(codec.stats().decode_misses);
}

void BM_ReconstructCached(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  FecCodec codec;
  EncodedBlock blk(codec, k, m, len);
  auto out = Shards(k, len, 6);
  std::vector<const uint8_t*> shards(k + m);
  std::vector<uint8_t*> outp(k);
  for (int j = 0; j < k; ++j) {
    shards[j] = blk.data[j].data();
    outp[j] = out[j].data();
  }
  for (int i = 0; i < m; ++i) shards[(i * k) / m] = nullptr;  // m lost, spread out
  for (int r = 0; r < m; ++r) shards[k + r] = blk.parity[r].data();
  for (auto _ : state) {
    if (!codec.Reconstruct(k, m, len, shards.data(), outp.data()).ok()) {
      state.SkipWithError("Reconstruct");
    }
    benchmark::DoNotOptimize(outp[0][0]);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

void BM_DecodeTableBuild(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  FecCodecOptions options;
  options.decode_cache_bytes = 0;  // nothing is cached: every call builds
  FecCodec codec(options);
  std::vector<uint8_t> lost(m), rows(m);
  for (int i = 0; i < m; ++i) {
    lost[i] = static_cast<uint8_t>((i * k) / m);
    rows[i] = static_cast<uint8_t>(i);
  }
  for (auto _ : state) {
    auto t = codec.DecodeTables(k, lost, rows);
    benchmark::DoNotOptimize(t->get());
  }
}

void BM_FullInversionMatrix(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0));
  const int m = static_cast<int>(state.range(1));
  std::vector<uint8_t> lost(m), rows(m), out(static_cast<size_t>(m) * k);
  for (int i = 0; i < m; ++i) {
    lost[i] = static_cast<uint8_t>((i * k) / m);
    rows[i] = static_cast<uint8_t>(i);
  }
  for (auto _ : state) {
    (void)DecodeMatrixByFullInversion(k, lost, rows, out.data());
    benchmark::DoNotOptimize(out[0]);
  }
}

void BM_ChooseFecParameters(benchmark::State& state) {
  FecPolicyInput in;
  in.loss_rate = 1e-3;
  in.mean_burst = static_cast<double>(state.range(0));
  in.packets_per_message = 8192;
  for (auto _ : state) {
    FecPolicyDecision d = ChooseFecParameters(in);
    benchmark::DoNotOptimize(d.m);
  }
}

void CodecArgs(benchmark::internal::Benchmark* b) {
  for (int len : {4096, 8192}) {
    for (int k : {8, 16, 32}) {
      for (int m : {1, 2, 4, 8}) b->Args({k, m, len});
    }
  }
  b->ArgNames({"k", "m", "shard"});
}

void TableArgs(benchmark::internal::Benchmark* b) {
  for (int k : {8, 16, 32, 64}) {
    for (int m : {1, 2, 4, 8}) b->Args({k, m});
  }
  b->ArgNames({"k", "m"});
}

BENCHMARK(BM_EncodeStreaming)->Apply(CodecArgs);
BENCHMARK(BM_EncodeStreamingPackets)
    ->ArgNames({"k", "m", "shard"})
    ->Args({32, 4, 8234})
    ->Args({32, 8, 8234})
    ->Args({32, 4, 1434});
BENCHMARK(BM_EncodeOneShot)->Apply(CodecArgs);
BENCHMARK(BM_DecodeCached)->Apply(CodecArgs);
BENCHMARK(BM_ReconstructCached)->Apply(CodecArgs);
BENCHMARK(BM_DecodeTableBuild)->Apply(TableArgs);
BENCHMARK(BM_FullInversionMatrix)->Apply(TableArgs);
BENCHMARK(BM_ChooseFecParameters)->ArgName("burst")->Arg(1)->Arg(8);

}  // namespace
}  // namespace longhaul::fec

int main(int argc, char** argv) {
  longhaul::ExitIfVersionRequested(argc, argv, "longhaul-fec-bench");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
