// longhaul-nccl-bench end to end (label nccl): rank processes over the plugin, directly on
// loopback and through longhaul-emu between two data centres; the allreduce result must
// verify at every size. Speed is not asserted (docs/nccl-runs.md has the benchmarks). Packet
// protection is chosen in every run: plaintext with NCCL_LONGHAUL_INSECURE=1, a
// pre-shared key and static keys (a key pair per rank) that the bench generates.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

// Runs a command (bounded by the bench's own --timeout) and returns its stdout and status.
std::string RunCommand(const std::string& cmd, int* status) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  *status = pclose(f);
  return out;
}

void CheckResult(const std::string& out, int status, int sizes) {
  ASSERT_EQ(status, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["out_of_bounds"], 0);
  ASSERT_EQ(j["results"].size(), static_cast<size_t>(sizes));
  for (const auto& r : j["results"]) {
    EXPECT_EQ(r["wrong"], 0);
    EXPECT_GT(r["busbw_GBps"].get<double>(), 0.0);
  }
}

// Runs ENV longhaul-nccl-bench ARGS, checks its JSON result (CheckResult with `sizes`) and
// returns it parsed (discarded when it does not parse).
nlohmann::json RunVerifiedBench(const std::string& env, const std::string& args, int sizes) {
  int status = 0;
  std::string out = RunCommand(env + LONGHAUL_NCCL_BENCH + args, &status);
  CheckResult(out, status, sizes);
  return nlohmann::json::parse(out, nullptr, false);
}

// Runs ENV longhaul-nccl-bench ARGS (stderr with stdout): it fails, saying `text`.
void ExpectClearError(const std::string& env, const std::string& args, const std::string& text) {
  int status = 0;
  std::string out = RunCommand(env + LONGHAUL_NCCL_BENCH + args + " 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find(text), std::string::npos) << out;
}

TEST(NcclBench, TwoRanksOnLoopbackVerifyEverySize) {
  // 4, 32, 256, 2K, 16K, 128K and 1M bytes: one float (empty chunks: zero-byte messages)
  // up to several slices per chunk.
  nlohmann::json j = RunVerifiedBench("NCCL_LONGHAUL_INSECURE=1 ",
                                      " --ranks=2 --min_bytes=4 --max_bytes=4MiB --step_factor=8"
                                      " --slice_bytes=256KiB --iters=2 --timeout=120s --json",
                                      7);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["security"], "as the environment sets it");
}

TEST(NcclBench, TwoRanksWithAPreSharedKey) {
  nlohmann::json j = RunVerifiedBench("",
                                      " --ranks=2 --min_bytes=4 --max_bytes=4MiB --step_factor=32"
                                      " --slice_bytes=256KiB --iters=2 --timeout=120s --json"
                                      " --security=psk",
                                      5);  // 4, 128, 4K, 128K and 4M bytes
  ASSERT_TRUE(j.is_object());
  EXPECT_NE(j["security"].get<std::string>().find("pre-shared key"), std::string::npos);
  bool psk_set = false;
  for (const auto& e : j["env"]) {
    psk_set = psk_set || e.get<std::string>().rfind("NCCL_LONGHAUL_PSK_FILE=", 0) == 0;
  }
  EXPECT_TRUE(psk_set) << j["env"];
}

TEST(NcclBench, NoChoiceOfKeysIsAClearError) {
  ExpectClearError("env -u NCCL_LONGHAUL_INSECURE ", " --ranks=2 --timeout=60s",
                   "no keys: give --security=psk");
  ExpectClearError("NCCL_LONGHAUL_INSECURE=1 ", " --ranks=2 --timeout=60s --security=psk",
                   "--security=psk and NCCL_LONGHAUL_INSECURE are both given");
}

TEST(NcclBench, FourRanksInTwoDataCentresThroughTheEmulator) {
  nlohmann::json j = RunVerifiedBench("",
                                      " --ranks=4 --link=rate=500mbit,rtt=10ms,loss=1e-3"
                                      " --emu=" LONGHAUL_EMU_BIN
                                      " --min_bytes=1KiB --max_bytes=1MiB --step_factor=32"
                                      " --slice_bytes=128KiB --iters=2 --timeout=180s --json"
                                      " --security=keys",
                                      3);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["emulated_edges"].size(), 2u);  // 1->2 and 3->0
  // Static keys: each rank its own pair; the listeners' keys travelled in the handles the
  // bench redirected through the emulators.
  EXPECT_NE(j["security"].get<std::string>().find("static keys"), std::string::npos);
}

TEST(NcclBench, MissingEmulatorIsAClearError) {
  ExpectClearError("",
                   " --ranks=2 --link=rate=1gbit,rtt=1ms --emu=/nonexistent/longhaul-emu --json",
                   "longhaul-emu not found");
}

// --recommend: engines one per 25 Gbit/s, channels one per 10 Gbit/s and a multiple of
// the engines (each peer gets a connection per engine).
TEST(NcclBench, RecommendationsScaleEnginesAndChannelsWithTheRate) {
  int status = 0;
  std::string out =
      RunCommand(std::string(LONGHAUL_NCCL_BENCH) + " --recommend --link=rate=1gbit,rtt=58ms", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("NCCL_LONGHAUL_ENGINES=1 "), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2 "), std::string::npos) << out;
  out = RunCommand(std::string(LONGHAUL_NCCL_BENCH) + " --recommend --link=rate=100gbit,rtt=58ms",
                   &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("NCCL_LONGHAUL_ENGINES=4 "), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_MIN_NCHANNELS=12 NCCL_MAX_NCHANNELS=12 "), std::string::npos) << out;
  out = RunCommand(std::string(LONGHAUL_NCCL_BENCH) + " --recommend --link=rate=400gbit,rtt=58ms",
                   &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("NCCL_LONGHAUL_ENGINES=8 "), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_MIN_NCHANNELS=16 NCCL_MAX_NCHANNELS=16 "), std::string::npos) << out;
}

TEST(NcclBench, MissingPluginIsAClearError) {
  ExpectClearError("", " --ranks=2 --plugin=/nonexistent/libnccl-net-x.so", "plugin not usable");
}

}  // namespace
