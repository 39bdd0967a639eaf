// longhaul-nccl-bench end to end (label nccl): rank processes over the plugin, directly on
// loopback and through longhaul-emu between two data centres; the allreduce result must
// verify at every size. Speed is not asserted (docs/nccl.md has the benchmarks). Packet
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

TEST(NcclBench, TwoRanksOnLoopbackVerifyEverySize) {
  int status = 0;
  std::string out = RunCommand(std::string("NCCL_LONGHAUL_INSECURE=1 ") + LONGHAUL_NCCL_BENCH +
                                   " --ranks=2 --min_bytes=4 --max_bytes=4MiB --step_factor=8"
                                   " --slice_bytes=256KiB --iters=2 --timeout=120s --json",
                               &status);
  // 4, 32, 256, 2K, 16K, 128K and 1M bytes: one float (empty chunks: zero-byte messages)
  // up to several slices per chunk.
  CheckResult(out, status, 7);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["security"], "as the environment sets it");
}

TEST(NcclBench, TwoRanksWithAPreSharedKey) {
  int status = 0;
  std::string out = RunCommand(std::string(LONGHAUL_NCCL_BENCH) +
                                   " --ranks=2 --min_bytes=4 --max_bytes=4MiB --step_factor=32"
                                   " --slice_bytes=256KiB --iters=2 --timeout=120s --json"
                                   " --security=psk",
                               &status);
  CheckResult(out, status, 5);  // 4, 128, 4K, 128K and 4M bytes
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_NE(j["security"].get<std::string>().find("pre-shared key"), std::string::npos);
  bool psk_set = false;
  for (const auto& e : j["env"]) {
    psk_set = psk_set || e.get<std::string>().rfind("NCCL_LONGHAUL_PSK_FILE=", 0) == 0;
  }
  EXPECT_TRUE(psk_set) << j["env"];
}

TEST(NcclBench, NoChoiceOfKeysIsAClearError) {
  int status = 0;
  std::string out = RunCommand(std::string("env -u NCCL_LONGHAUL_INSECURE ") + LONGHAUL_NCCL_BENCH +
                                   " --ranks=2 --timeout=60s 2>&1",
                               &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("no keys: give --security=psk"), std::string::npos) << out;
  out = RunCommand(std::string("NCCL_LONGHAUL_INSECURE=1 ") + LONGHAUL_NCCL_BENCH +
                       " --ranks=2 --timeout=60s --security=psk 2>&1",
                   &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--security=psk and NCCL_LONGHAUL_INSECURE are both given"), std::string::npos)
      << out;
}

TEST(NcclBench, FourRanksInTwoDataCentresThroughTheEmulator) {
  int status = 0;
  std::string out = RunCommand(std::string(LONGHAUL_NCCL_BENCH) +
                                   " --ranks=4 --link=rate=500mbit,rtt=10ms,loss=1e-3"
                                   " --emu=" LONGHAUL_EMU_BIN
                                   " --min_bytes=1KiB --max_bytes=1MiB --step_factor=32"
                                   " --slice_bytes=128KiB --iters=2 --timeout=180s --json"
                                   " --security=keys",
                               &status);
  CheckResult(out, status, 3);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["emulated_edges"].size(), 2u);  // 1->2 and 3->0
  // Static keys: each rank its own pair; the listeners' keys travelled in the handles the
  // bench redirected through the emulators.
  EXPECT_NE(j["security"].get<std::string>().find("static keys"), std::string::npos);
}

TEST(NcclBench, MissingEmulatorIsAClearError) {
  int status = 0;
  std::string out =
      RunCommand(std::string(LONGHAUL_NCCL_BENCH) +
                     " --ranks=2 --link=rate=1gbit,rtt=1ms --emu=/nonexistent/longhaul-emu"
                     " --json 2>&1",
                 &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("longhaul-emu not found"), std::string::npos) << out;
}

TEST(NcclBench, MissingPluginIsAClearError) {
  int status = 0;
  std::string out = RunCommand(
      std::string(LONGHAUL_NCCL_BENCH) + " --ranks=2 --plugin=/nonexistent/libnccl-net-x.so 2>&1",
      &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("plugin not usable"), std::string::npos) << out;
}

}  // namespace
