// tools/bench/wan-compare and tools/bench/coexist end to end: a few seconds per run on
// rate=100mbit,rtt=10ms
// through longhaul-emu's TUN mode, between namespaces wan-compare creates and removes
// (198.18.0.1 / 198.18.0.2 only). Checks the JSON's shape, that every peer either ran
// (numbers and the exact command) or says why not, that the host's socket-buffer sysctls
// are back to what they were and that no namespace is left behind. Skips, saying why,
// without root or /dev/net/tun. The comparison peers themselves are also run over
// loopback (127.0.0.1), which needs no privileges.
//
// Timings are never asserted: only that values exist and are consistent.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_command.h"
#include "transport/emu/netns.h"

namespace longhaul {
namespace {

using Json = nlohmann::json;

const char* const kPeers[] = {"longhaul", "seed_recipe", "tcp_bbr", "tcp_cubic", "udt"};

using Output = testing::CommandOutput;
using testing::RunCommand;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::set<std::string> Namespaces() {
  std::set<std::string> out;
  if (DIR* d = opendir("/run/netns")) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.insert(n);
    }
    closedir(d);
  }
  return out;
}

std::string WanCompare() { return absl::StrCat(LONGHAUL_SOURCE_DIR, "/tools/bench/wan-compare"); }

class WanCompareNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = emu::CheckTunModePrivileges(); !s.ok()) {
      GTEST_SKIP() << "wan-compare needs root and /dev/net/tun: " << s.message();
    }
    rmem_before_ = ReadFile("/proc/sys/net/core/rmem_max");
    wmem_before_ = ReadFile("/proc/sys/net/core/wmem_max");
    ns_before_ = Namespaces();
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_EQ(ReadFile("/proc/sys/net/core/rmem_max"), rmem_before_) << "rmem_max not restored";
    EXPECT_EQ(ReadFile("/proc/sys/net/core/wmem_max"), wmem_before_) << "wmem_max not restored";
    for (const std::string& n : Namespaces()) {
      EXPECT_TRUE(ns_before_.count(n) > 0 ||
                  (n.rfind("lhwc", 0) != 0 && n.rfind("lhco", 0) != 0))
          << "namespace left behind: " << n;
    }
  }

  // Runs wan-compare with `flags` and returns its JSON (fails the test if there is none).
  Json Compare(const std::string& flags, int bound_s) {
    const std::string cmd =
        absl::StrCat(WanCompare(), " --link=rate=100mbit,rtt=10ms --json --settle=0.5",
                     " --tune_budget=5s --build_dir=", LONGHAUL_BUILD_DIR, " ", flags);
    Output o = RunCommand(cmd, bound_s);
    Json j = Json::parse(o.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "no JSON from: " << cmd << "\n" << o.out;
    if (!j.is_object()) return Json::object();
    for (const char* k : {"link", "workload", "results", "machine", "longhaul_profile"}) {
      EXPECT_TRUE(j.contains(k)) << k;
    }
    EXPECT_EQ(j["link"], "rate=100mbit,rtt=10ms");
    return j;
  }

  // Every peer has an entry that either ran (the command and `metric`) or says why not.
  void CheckPeers(const Json& j, const char* metric) {
    ASSERT_TRUE(j.contains("results"));
    for (const char* peer : kPeers) {
      SCOPED_TRACE(peer);
      ASSERT_TRUE(j["results"].contains(peer));
      const Json& e = j["results"][peer];
      if (e.contains("error")) {
        EXPECT_TRUE(e["error"].is_string());
        EXPECT_FALSE(e["error"].get<std::string>().empty());
        continue;
      }
      ASSERT_TRUE(e.contains("command"));
      EXPECT_NE(e["command"].get<std::string>().find("ip netns exec A"), std::string::npos);
      ASSERT_TRUE(e.contains(metric)) << e.dump();
      EXPECT_GT(e[metric].get<double>(), 0);
      ASSERT_TRUE(e.contains("emulator"));
      EXPECT_TRUE(e["emulator"].contains("own_drops"));
      EXPECT_TRUE(e.contains("load_avg"));
      EXPECT_TRUE(e.contains("retransmissions"));
    }
  }

  std::string rmem_before_, wmem_before_;
  std::set<std::string> ns_before_;
};

TEST_F(WanCompareNetnsTest, BulkEveryPeerRunsOrSaysWhy) {
  Json j = Compare("--workload=bulk --time=3 --omit=1", 600);
  EXPECT_EQ(j["workload"]["name"], "bulk");
  CheckPeers(j, "goodput_bps");
  // iperf3 and longhaul-perf are installed and built here: these must have run.
  for (const char* peer : {"longhaul", "tcp_bbr", "tcp_cubic"}) {
    EXPECT_FALSE(j["results"][peer].contains("error")) << peer << ": " << j["results"][peer];
  }
  // Goodput cannot exceed the link.
  for (const char* peer : kPeers) {
    const Json& e = j["results"][peer];
    if (e.contains("goodput_bps")) {
      EXPECT_LT(e["goodput_bps"].get<double>(), 1.02e8) << peer;
    }
  }
}

TEST_F(WanCompareNetnsTest, MessagesReportCompletionTimes) {
  Json j = Compare("--workload=messages --message_size=256KiB --load=0.3 --messages=10", 600);
  CheckPeers(j, "mct_p99_s");
  for (const char* peer : kPeers) {
    const Json& e = j["results"][peer];
    if (e.contains("error")) continue;
    SCOPED_TRACE(peer);
    EXPECT_EQ(e["messages"].get<uint64_t>(), 10u);
    EXPECT_LE(e["mct_p50_s"].get<double>(), e["mct_p99_s"].get<double>());
    EXPECT_GT(e["mct_ideal_s"].get<double>(), 0.005);  // one way is 5 ms
  }
}

TEST_F(WanCompareNetnsTest, TransferReportsCompletionFromConnect) {
  Json j = Compare("--workload=transfer --bytes=4MiB", 600);
  CheckPeers(j, "completion_s");
  for (const char* peer : kPeers) {
    const Json& e = j["results"][peer];
    if (e.contains("error")) continue;
    // At least one round trip (connect) plus one way.
    EXPECT_GT(e["completion_s"].get<double>(), 0.015) << peer;
  }
}

TEST_F(WanCompareNetnsTest, LonghaulDefaultsRunsWithoutAProfile) {
  // The optional peer: longhaul-perf as a new user runs it (no profile, so cc=bbr, no cap).
  Json j = Compare("--workload=bulk --time=3 --omit=1 --peers=longhaul_defaults,longhaul", 300);
  ASSERT_TRUE(j["results"].contains("longhaul_defaults"));
  const Json& d = j["results"]["longhaul_defaults"];
  ASSERT_FALSE(d.contains("error")) << d;
  EXPECT_GT(d["goodput_bps"].get<double>(), 0);
  EXPECT_LT(d["goodput_bps"].get<double>(), 1.02e8);
  const std::string cmd = d["command"].get<std::string>();
  EXPECT_EQ(cmd.find("--profile"), std::string::npos) << cmd;
  EXPECT_EQ(d["longhaul"]["params"]["cc"], "bbr") << d["longhaul"];
  // The tuned entry still runs with its profile.
  EXPECT_NE(j["results"]["longhaul"]["command"].get<std::string>().find("--profile="),
            std::string::npos);
}

TEST(WanCompareFlagsTest, BadFlagsExit2) {
  Output o = RunCommand(absl::StrCat(WanCompare(), " --link=rate=100mbit,rtt=10ms --load=3 2>&1"), 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("--load"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(WanCompare(), " --link=nosuchlink 2>&1"), 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("nosuchlink"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(WanCompare(), " --link=rate=100mbit,rtt=10ms --peers=longhaul_default 2>&1"), 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("unknown peer 'longhaul_default'"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(WanCompare(),
                              " --link=rate=100mbit,rtt=10ms --longhaul_variant=defaults:--window=1MiB 2>&1"),
                 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("'defaults' is taken"), std::string::npos) << o.out;
}

// ---- coexist: longhaul and TCP at the same time through one bottleneck ----

std::string Coexist() { return absl::StrCat(LONGHAUL_SOURCE_DIR, "/tools/bench/coexist"); }

using CoexistNetnsTest = WanCompareNetnsTest;

TEST_F(CoexistNetnsTest, SharesAndTcpAloneAreReportedPerSecond) {
  const std::string cmd = absl::StrCat(
      Coexist(), " --link=rate=100mbit,rtt=10ms --cases=cubic1 --losses=0 --time=12",
      " --warmup=2 --settle=0.5 --json --longhaul_flags=--cc_compete --build_dir=",
      LONGHAUL_BUILD_DIR);
  Output o = RunCommand(cmd, 300);
  EXPECT_EQ(o.status, 0) << o.out;
  Json j = Json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  ASSERT_EQ(j["cases"].size(), 1u) << j.dump();
  const Json& c = j["cases"][0];
  ASSERT_FALSE(c.contains("error")) << c.dump();
  EXPECT_EQ(c["tcp_cc"], "cubic");
  EXPECT_EQ(c["tcp_flows"], 1);
  // Both ran at the same time, the transfer was intact, and the commands are recorded.
  EXPECT_GT(c["longhaul_bps"].get<double>(), 0);
  EXPECT_GT(c["tcp_bps"].get<double>(), 0);
  EXPECT_GT(c["tcp_alone_bps"].get<double>(), 0);
  EXPECT_EQ(c["together"]["longhaul_intact"], true) << c["together"].dump();
  EXPECT_NE(c["together"]["longhaul_command"].get<std::string>().find("ip netns exec A"),
            std::string::npos);
  EXPECT_NE(c["together"]["tcp_command"].get<std::string>().find("-C cubic"), std::string::npos);
  EXPECT_NE(c["together"]["longhaul_command"].get<std::string>().find("--cc_compete"),
            std::string::npos);
  // Shares are fractions, the mean between the extremes; together they fit the link.
  const double share = c["share_mean"].get<double>();
  EXPECT_GT(share, 0);
  EXPECT_LT(share, 1);
  EXPECT_LE(c["share_5s_min"].get<double>(), share + 1e-9);
  EXPECT_GE(c["share_5s_max"].get<double>(), share - 1e-9);
  EXPECT_LT(c["longhaul_bps"].get<double>() + c["tcp_bps"].get<double>(), 1.05e8);
  ASSERT_EQ(c["series"].size(), 12u);
  for (const Json& s : c["series"]) EXPECT_EQ(s.size(), 3u);
}

TEST(CoexistFlagsTest, BadFlagsExit2) {
  Output o = RunCommand(absl::StrCat(Coexist(), " --cases=tcp9 2>&1"), 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("--cases: 'tcp9'"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(Coexist(), " --losses=2 2>&1"), 60);
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.out.find("outside [0, 1)"), std::string::npos) << o.out;
}

// ---- the peers over loopback (no privileges needed) ----

// Starts `server` in the background, waits (bounded, 10 s) for its "listening" line, runs
// `client`, returns the client's JSON.
Json PeerRun(const std::string& server, const std::string& client) {
  const std::string ready = absl::StrCat(::testing::TempDir(), "/peer-ready-", getpid());
  const std::string cmd = absl::StrCat(
      "rm -f ", ready, "; (", server, " >", ready, " 2>/dev/null &) ; ",
      "for i in $(seq 200); do grep -q listening ", ready, " 2>/dev/null && break; ",
      "sleep 0.05; done; ", client);
  Output o = RunCommand(absl::StrCat("sh -c '", cmd, "'"), 120);
  EXPECT_EQ(o.status, 0) << o.out;
  Json j = Json::parse(o.out, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("end")) << o.out;
  return j.is_object() ? j : Json::object();
}

std::string Bin(const char* name) { return absl::StrCat(LONGHAUL_BUILD_DIR, "/bin/", name); }

TEST(ComparePeersLoopbackTest, TcpPeerMessagesAndTransfer) {
  const std::string srv =
      absl::StrCat(Bin("longhaul-tcp-peer"), " --server --bind=127.0.0.1 --port=35302 --one_off "
                                             "--accept_timeout=30s");
  Json m = PeerRun(srv, absl::StrCat(Bin("longhaul-tcp-peer"),
                                     " --client=127.0.0.1 --port=35302 --cc=cubic "
                                     "--workload=messages --message_size=64KiB --messages=40 "
                                     "--load=0.5 --rate=100mbit"));
  ASSERT_TRUE(m.contains("end"));
  const Json& e = m["end"];
  EXPECT_EQ(e["messages"].get<uint64_t>(), 40u);
  EXPECT_EQ(e["sum_received"]["bytes"].get<uint64_t>(), 40u * 65536);
  EXPECT_LE(e["mct_p50_s"].get<double>(), e["mct_max_s"].get<double>());
  EXPECT_EQ(e["mct_cdf"].size(), 102u);
  EXPECT_EQ(m["start"]["congestion"], "cubic");

  Json t = PeerRun(srv, absl::StrCat(Bin("longhaul-tcp-peer"),
                                     " --client=127.0.0.1 --port=35302 --workload=transfer "
                                     "--bytes=8MiB"));
  ASSERT_TRUE(t.contains("end"));
  EXPECT_EQ(t["end"]["sum_received"]["total_bytes"].get<uint64_t>(), 8u << 20);
  EXPECT_GE(t["end"]["completion_s"].get<double>(), t["end"]["first_byte_s"].get<double>());
}

TEST(ComparePeersLoopbackTest, UdtPeerBulkAndTransfer) {
  if (access(Bin("longhaul-udt-peer").c_str(), X_OK) != 0) {
    GTEST_SKIP() << "longhaul-udt-peer not built (libudt-dev missing)";
  }
  const std::string srv =
      absl::StrCat(Bin("longhaul-udt-peer"), " --server --bind=127.0.0.1 --port=35303 --one_off "
                                             "--accept_timeout=30s --buffer=64MiB --udp_buffer=4MiB");
  Json b = PeerRun(srv, absl::StrCat(Bin("longhaul-udt-peer"),
                                     " --client=127.0.0.1 --port=35303 --workload=bulk --time=1 "
                                     "--omit=0.5 --buffer=64MiB --udp_buffer=4MiB"));
  ASSERT_TRUE(b.contains("end"));
  EXPECT_GT(b["end"]["sum_received"]["bits_per_second"].get<double>(), 0);
  EXPECT_EQ(b["start"]["udt_options"]["UDT_MSS"].get<int>(), 9000);
  Json t = PeerRun(srv, absl::StrCat(Bin("longhaul-udt-peer"),
                                     " --client=127.0.0.1 --port=35303 --workload=transfer "
                                     "--bytes=8MiB --buffer=64MiB --udp_buffer=4MiB"));
  ASSERT_TRUE(t.contains("end"));
  EXPECT_EQ(t["end"]["sum_received"]["total_bytes"].get<uint64_t>(), 8u << 20);
}

TEST(ComparePeersLoopbackTest, BadFlagsAreNamed) {
  Output o = RunCommand(absl::StrCat(Bin("longhaul-tcp-peer"),
                              " --client=127.0.0.1 --workload=transfer 2>/dev/null"),
                 30);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("--bytes"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(Bin("longhaul-tcp-peer"), " --client=not-an-ip 2>/dev/null"), 30);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.out.find("not-an-ip"), std::string::npos) << o.out;
  o = RunCommand(absl::StrCat(Bin("longhaul-tcp-peer"),
                       " --client=127.0.0.1 --port=1 --workload=bulk --time=1 2>/dev/null"),
          30);
  EXPECT_EQ(o.status, 1);  // nothing listens on port 1
  EXPECT_NE(o.out.find("unable to connect"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace longhaul
