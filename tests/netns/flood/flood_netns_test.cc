// tools/bench/flood, short: a longhaul-perf server in a namespace of its own, flooded
// from another with spoofed client Initials (sources from 198.18.128.0/17) and with
// random garbage, while a legitimate client in a third namespace runs; then 500
// connections to it at once. Asserts on the script's JSON: the server's RSS stays within
// 64 MiB of its level before each flood, it sends spoofed sources at most one datagram
// per Initial and at most 3x the bytes (on the wire), it answers no garbage (beyond the
// probe responder's version ERROR to datagrams with the probe magic), the legitimate
// client completes intact, every connection completes intact and all were open at once.
// Goodput is reported, never asserted (a timing; the script's own verdict asks >= 90 %).
// Skips, saying why, without root or `ip netns`; checks no namespace is left behind.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
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

std::set<std::string> FloodNamespaces() {
  std::set<std::string> out;
  if (DIR* d = opendir("/run/netns")) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("lhfl", 0) == 0) out.insert(n);
    }
    closedir(d);
  }
  return out;
}

TEST(FloodNetnsTest, SpoofedInitialsGarbageAndFiveHundredConnections) {
  if (geteuid() != 0) GTEST_SKIP() << "flood needs root (network namespaces, raw sockets)";
  const std::set<std::string> before = FloodNamespaces();
  const std::string cmd = absl::StrCat(
      LONGHAUL_SOURCE_DIR, "/tools/bench/flood --build_dir=", LONGHAUL_BUILD_DIR,
      " --kinds=initial,garbage,conns --time=3 --initial_pps=10000 --garbage_pps=30000",
      " --legit_rate=50mbit --conns=500 --conn_procs=4 --min_goodput_ratio=0 --json");
  Output o = RunCommand(cmd, 500);
  if (o.status == 3) GTEST_SKIP() << "flood cannot run here (see its message in the log)";
  const Json j = Json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no JSON from: " << cmd << "\n" << o.out;
  EXPECT_EQ(o.status, 0);
  EXPECT_TRUE(j["pass"].get<bool>());
  for (const char* kind : {"initial", "garbage"}) {
    SCOPED_TRACE(kind);
    const Json& r = j["results"][kind];
    EXPECT_TRUE(r["problems"].empty()) << r["problems"].dump();
    const uint64_t in_pkts = r["wire_from_spoofed"]["packets"];
    const uint64_t in_bytes = r["wire_from_spoofed"]["bytes"];
    const uint64_t out_pkts = r["wire_to_spoofed"]["packets"];
    const uint64_t out_bytes = r["wire_to_spoofed"]["bytes"];
    EXPECT_GT(r["flood"]["packets"].get<uint64_t>(), 1000u);
    EXPECT_GT(in_pkts, 1000u) << "the flood did not reach the server's namespace";
    EXPECT_LE(out_bytes, 3 * in_bytes);
    EXPECT_LE(out_pkts, in_pkts);
    const Json& rss = r["server_rss_kib"];
    EXPECT_LE(rss["peak_during"].get<int64_t>() - rss["before"].get<int64_t>(), 64 * 1024);
    for (const char* phase : {"before", "during", "after"}) {
      ASSERT_TRUE(r["legit_goodput_bps"][phase].is_number()) << phase;
      EXPECT_GT(r["legit_goodput_bps"][phase].get<double>(), 0) << phase;
    }
  }
  // Initials are answered (a Retry each, far below 3x); garbage is not.
  EXPECT_GT(j["results"]["initial"]["wire_to_spoofed"]["packets"].get<uint64_t>(), 0u);
  const Json& g = j["results"]["garbage"];
  EXPECT_LE(g["answered"]["datagrams"].get<uint64_t>(),
            g["answered"]["garbage_with_probe_magic"].get<uint64_t>());
  const Json& c = j["results"]["conns"];
  EXPECT_TRUE(c["problems"].empty()) << c["problems"].dump();
  EXPECT_EQ(c["completed_intact"], 500);
  EXPECT_EQ(c["peak_open_at_once"], 500);
  EXPECT_EQ(FloodNamespaces(), before) << "namespaces left behind";
}

}  // namespace
}  // namespace longhaul
