// tools/bench/soak, CI-sized: 60 s of a bulk and a messages longhaul-perf client at once
// through longhaul-emu (UDP relay on 127.0.0.1) with loss=1e-3, 1 % reordering and two
// blackouts (loss=1 for 1 s), with protection (a pre-shared key). Asserts what the soak
// checks, nothing timed: both clients complete, every byte sent is verified and no
// message is corrupt, the server reports both tests intact, the blackouts were scheduled,
// and RSS (sampled every 2 s) stays within a generous bound (2x its level at 20 s; the
// real memory criterion, +10 % after 5 minutes, needs the 30-minute run,
// docs/flood-soak.md).
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_command.h"

namespace longhaul {
namespace {

using Json = nlohmann::json;

using Output = testing::CommandOutput;
using testing::RunCommand;

TEST(SoakE2eTest, AMinuteOfBulkAndMessagesThroughBlackoutsLosesNothing) {
  const std::string cmd = absl::StrCat(
      LONGHAUL_SOURCE_DIR, "/tools/bench/soak --build_dir=", LONGHAUL_BUILD_DIR,
      " --duration=60s --blackout_every=20s --blackout_len=1s --warmup=20s --sample=2s",
      " --rss_growth=1.0 --security=psk --json");
  Output o = RunCommand(cmd, 300);
  const Json j = Json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no JSON from: " << cmd << "\n" << o.out;
  EXPECT_EQ(o.status, 0) << j["verdict"].dump();
  const Json& v = j["verdict"];
  EXPECT_TRUE(v["pass"].get<bool>()) << v.dump();
  EXPECT_EQ(v["lost_or_corrupt_messages"], 0);
  EXPECT_TRUE(v["rss_within_bound"].get<bool>()) << j["rss"].dump();
  // Two blackouts (at 20 s and 40 s), each a loss=1 step and a step back.
  ASSERT_EQ(j["blackouts"].size(), 2u) << j["link_schedule"];
  EXPECT_NE(j["link_schedule"].get<std::string>().find("20s:loss=1"), std::string::npos);
  for (const char* c : {"bulk_client", "msg_client"}) {
    SCOPED_TRACE(c);
    const Json& n = j["clients"][c];
    EXPECT_EQ(n["exit"], 0);
    EXPECT_EQ(n["corrupt_messages"], 0);
    EXPECT_TRUE(n["intact"].get<bool>());
    ASSERT_TRUE(n["bytes_sent"].is_number());
    EXPECT_GT(n["bytes_sent"].get<uint64_t>(), 0u);
    EXPECT_EQ(n["bytes_sent"], n["bytes_verified"]);
    // The link lost packets (loss=1e-3 and the blackouts) and they were resent.
    EXPECT_GT(n["packets_retransmitted"].get<uint64_t>(), 0u);
  }
  EXPECT_GT(j["clients"]["msg_client"]["messages"].get<double>(), 0);
  ASSERT_EQ(j["server_tests"].size(), 2u);
  for (const Json& t : j["server_tests"]) EXPECT_TRUE(t["intact"].get<bool>()) << t.dump();
  // Every process was sampled throughout (60 s every 2 s).
  EXPECT_GE(j["samples"].size(), 25u);
  for (const char* p : {"server", "bulk_client", "msg_client", "emulator"}) {
    EXPECT_TRUE(j["rss"][p].contains("rss_at_warmup_kib")) << p;
  }
  // The relay itself never dropped (its own drops would not be the link's).
  EXPECT_EQ(j["emulator"]["own_drops"], 0);
}

}  // namespace
}  // namespace longhaul
