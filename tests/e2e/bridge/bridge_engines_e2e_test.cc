// longhaul-bridge on several engines and connections end to end (docs/bridge.md
// section 6, "Engines and connections"): both bridges with --engines=2, the client with
// --connections=2; concurrent streams through them arrive intact, both connections carry
// streams (seen in the client's per-connection and per-engine metrics), both reconnect
// when the server is killed and restarted, and bad --engines / --engine_cpus /
// --connections values exit 2 naming the flag. Traffic on 127.0.0.1; every wait bounded.
#include <csignal>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/e2e/bridge/bridge_harness.h"
#include "tests/e2e/emu/emu_process.h"

namespace longhaul::bridge_testing {
namespace {

using emu::testing::RunResult;
using emu::testing::RunToCompletion;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

const std::vector<std::string> kEngines = {"--engines=2"};
const std::vector<std::string> kClientFlags = {"--engines=2", "--connections=2"};

// The sum of every sample of `family` (any labels) whose labels contain `label`.
double SumOf(const std::map<std::string, double>& m, const std::string& family,
             const std::string& label) {
  double sum = 0;
  for (const auto& [series, v] : m) {
    if (absl::StartsWith(series, family + "{") && absl::StrContains(series, label)) sum += v;
  }
  return sum;
}

// Polls `b`'s metrics (10 s at most) until `pred` holds for them; the last text seen
// goes into the failure message.
bool WaitMetrics(const Bridge& b,
                 const std::function<bool(const std::map<std::string, double>&)>& pred,
                 std::string* last) {
  const auto deadline = Clock::now() + milliseconds(10000);
  while (true) {
    const std::map<std::string, double> m = FetchMetrics(b.metrics_port);
    if (pred(m)) return true;
    last->clear();
    for (const auto& [series, v] : m) {
      if (absl::StrContains(series, "session_") || absl::StrContains(series, "engine")) {
        absl::StrAppend(last, series, " ", v, "\n");
      }
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(50));  // poll interval, not synchronisation
  }
}

// Both connections of the client are up and on different engines (Connect places them
// in turn), and the server holds both.
void ExpectTwoConnections(Bridge& client, const Bridge& server) {
  ASSERT_TRUE(client.WaitLine("connected to ", kStartTimeout, /*nth=*/2)) << client.Stderr();
  ExpectMetric(client, "longhaul_bridge_sessions_open", 2);
  ExpectMetric(client, "longhaul_bridge_connections_configured", 2);
  ExpectMetric(client, "longhaul_bridge_engines", 2);
  ExpectMetric(client, "longhaul_bridge_engine_connections{engine=\"0\"}", 1);
  ExpectMetric(client, "longhaul_bridge_engine_connections{engine=\"1\"}", 1);
  ExpectMetric(server, "longhaul_bridge_sessions_open", 2);
  ExpectMetric(server, "longhaul_bridge_engines", 2);
  std::string last;
  EXPECT_TRUE(WaitMetrics(
      server,
      [](const std::map<std::string, double>& m) {
        return SumOf(m, "longhaul_bridge_engine_connections", "engine=") == 2;
      },
      &last))
      << "the server's engines do not run the two connections:\n"
      << last;
}

TEST(BridgeEnginesE2E, StreamsSpreadOverTwoConnectionsOnTwoEngines) {
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kEcho, kEngines, kClientFlags));
  ASSERT_NO_FATAL_FAILURE(ExpectTwoConnections(*p.client, *p.server));

  // Eight streams at once, of several sizes: each link gets four (the fewest streams,
  // ties in turn), every byte comes back intact.
  const std::vector<uint64_t> sizes = {1,        64 * kKiB, 1 * kMiB + 7, 3 * kMiB,
                                       5 * kMiB, 100,       2 * kMiB,     777 * kKiB};
  const std::vector<Exchange> results =
      DoEchoExchanges(p.client->tcp_port, sizes, milliseconds(60000));
  ExpectEchoesIntact(results, sizes);
  ExpectCompletedWithoutResets(*p.client, *p.server, static_cast<double>(sizes.size()));

  // Both connections carried data, each at least the smallest share four streams can
  // make (1 + 100 + 64 KiB + 777 KiB: the four smallest), both ways.
  const double least = 1 + 100 + 64 * kKiB + 777 * kKiB;
  std::string last;
  EXPECT_TRUE(WaitMetrics(
      *p.client,
      [&](const std::map<std::string, double>& m) {
        for (const char* c : {"connection=\"0\"", "connection=\"1\""}) {
          if (SumOf(m, "longhaul_bridge_session_sent_data_bytes_total", c) < least) return false;
          if (SumOf(m, "longhaul_bridge_session_received_data_bytes_total", c) < least) {
            return false;
          }
        }
        return true;
      },
      &last))
      << "a connection carried less than four streams' worth:\n"
      << last;
  // Each engine moved datagrams both ways and its thread used CPU time.
  const std::map<std::string, double> m = FetchMetrics(p.client->metrics_port);
  for (const char* e : {"engine=\"0\"", "engine=\"1\""}) {
    EXPECT_GT(SumOf(m, "longhaul_bridge_engine_sent_bytes_total", e), least) << e;
    EXPECT_GT(SumOf(m, "longhaul_bridge_engine_received_bytes_total", e), least) << e;
    EXPECT_GT(SumOf(m, "longhaul_bridge_engine_cpu_seconds_total", e), 0) << e;
  }
  p.Stop();
}

TEST(BridgeEnginesE2E, BothConnectionsReconnectAfterTheServerRestarts) {
  const std::vector<std::string> quick = {"--idle_timeout=2s", "--keepalive=500ms"};
  std::vector<std::string> client_flags = kClientFlags;
  for (const char* f : {"--idle_timeout=2s", "--keepalive=500ms", "--connect_timeout=1s",
                        "--reconnect_max=500ms", "--connect_wait=20s"}) {
    client_flags.push_back(f);
  }
  std::vector<std::string> server_flags = kEngines;
  server_flags.insert(server_flags.end(), quick.begin(), quick.end());
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kEcho, server_flags, client_flags));
  ASSERT_NO_FATAL_FAILURE(ExpectTwoConnections(*p.client, *p.server));
  // Two open streams, one on each connection (the fewest streams, ties in turn).
  std::vector<Fd> apps;
  for (int i = 0; i < 2; ++i) {
    apps.push_back(ConnectTcp(p.client->tcp_port));
    ASSERT_TRUE(apps.back().valid());
    ASSERT_TRUE(SendPattern(apps.back().get(), 1000));
    std::string echoed;
    ASSERT_TRUE(RecvExact(apps.back().get(), 1000, &echoed));
  }
  std::string last;
  EXPECT_TRUE(WaitMetrics(
      *p.client,
      [](const std::map<std::string, double>& m) {
        return SumOf(m, "longhaul_bridge_session_streams_open", "connection=\"0\"") == 1 &&
               SumOf(m, "longhaul_bridge_session_streams_open", "connection=\"1\"") == 1;
      },
      &last))
      << last;

  const int port = p.server->udp_port;
  p.server->Signal(SIGKILL);
  absl::StatusOr<int> st = p.server->Wait(milliseconds(10000));
  ASSERT_TRUE(st.ok()) << st.status();
  std::vector<std::string> restart = server_flags;
  restart.push_back(absl::StrCat("--listen=127.0.0.1:", port));
  restart.push_back(TargetFlag(p.target->port()));
  p.server = StartServer(restart, /*metrics=*/true);
  ASSERT_TRUE(p.server);

  // Both streams are reset (never a hang), as with one connection.
  for (Fd& app : apps) {
    ReadResult r = ReadToEnd(app.get(), false, 0, Clock::now() + milliseconds(20000));
    EXPECT_EQ(r.end, End::kReset) << EndName(r.end) << " errno " << r.err;
  }
  // Both connections come back, and new streams through them are intact.
  EXPECT_TRUE(p.client->WaitLine("connected to ", milliseconds(20000), /*nth=*/4))
      << p.client->Stdout();
  ExpectMetric(*p.client, "longhaul_bridge_sessions_open", 2, milliseconds(20000));
  ExpectMetric(*p.client, "longhaul_bridge_reconnects_total", 2);
  ExpectMetric(*p.server, "longhaul_bridge_sessions_open", 2);
  const std::vector<uint64_t> sizes = {100 * kKiB + 1, 3, 2 * kMiB, 10};
  ExpectEchoesIntact(DoEchoExchanges(p.client->tcp_port, sizes, milliseconds(30000)), sizes);
  ExpectMetric(*p.server, "longhaul_bridge_streams_completed_total",
               static_cast<double>(sizes.size()));
  p.Stop();
}

// A server that allows fewer sessions per client key than the client keeps connections:
// the extra connection is refused (and retried with the backoff), the streams go over
// the connection that is up, intact.
TEST(BridgeEnginesE2E, ConnectionsBeyondSessionsPerKeyAreRefusedAndStreamsStillFlow) {
  std::vector<std::string> server_flags = kEngines;
  server_flags.push_back("--sessions_per_key=1");
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kEcho, server_flags, kClientFlags));
  double refused = NAN;
  EXPECT_TRUE(WaitMetric(
      p.server->metrics_port, "longhaul_bridge_refused_total{reason=\"sessions\"}",
      [](double v) { return v >= 1; }, milliseconds(10000), &refused))
      << refused;
  ExpectMetric(*p.server, "longhaul_bridge_sessions_open", 1);
  const std::vector<uint64_t> sizes = {3 * kMiB, 1, 200 * kKiB, 5};
  ExpectEchoesIntact(DoEchoExchanges(p.client->tcp_port, sizes, milliseconds(30000)), sizes);
  ExpectCompletedWithoutResets(*p.client, *p.server, static_cast<double>(sizes.size()));
  p.Stop();
}

TEST(BridgeEnginesE2E, BadEngineAndConnectionFlagsExit2) {
  const std::string listen = "--listen=127.0.0.1:0";
  const std::string peer = "--peer=127.0.0.1:9";
  const std::string target = "--target=127.0.0.1:9";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"client", "--insecure", listen, peer, "--engines=-1"},
       "--engines must be in [0 (one per CPU), 64]: got -1"},
      {{"server", "--insecure", listen, target, "--engines=65"},
       "--engines must be in [0 (one per CPU), 64]: got 65"},
      {{"client", "--insecure", listen, peer, "--engines=two"}, "--engines"},
      {{"client", "--insecure", listen, peer, "--engine_cpus=0,x"},
       "--engine_cpus: bad CPU 'x' in '0,x'"},
      {{"server", "--insecure", listen, target, "--engine_cpus=5-3"},
       "--engine_cpus: range '5-3' in '5-3' runs backwards"},
      {{"client", "--insecure", listen, peer, "--engine_cpus=0,,1"},
       "--engine_cpus: empty item in '0,,1'"},
      {{"client", "--insecure", listen, peer, "--engine_cpus=1023"},
       "--engine_cpus: CPU 1023 is not one this process may run on"},
      {{"client", "--insecure", listen, peer, "--connections=0"},
       "--connections must be in [1, 64]: got 0"},
      {{"client", "--insecure", listen, peer, "--connections=65"},
       "--connections must be in [1, 64]: got 65"},
      {{"server", "--insecure", listen, target, "--connections=2"},
       "--connections is the client's"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("longhaul-bridge ", absl::StrJoin(c.args, " ")));
    absl::StatusOr<RunResult> r = RunToCompletion(LONGHAUL_BRIDGE_BIN, c.args, milliseconds(20000));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << r->stderr_text;
    EXPECT_TRUE(absl::StrContains(r->stderr_text, c.message))
        << "stderr: " << r->stderr_text << "\nwanted: " << c.message;
    EXPECT_TRUE(r->stdout_text.empty()) << r->stdout_text;
  }
  // The help names the new flags.
  absl::StatusOr<RunResult> help =
      RunToCompletion(LONGHAUL_BRIDGE_BIN, {"--help"}, milliseconds(20000));
  ASSERT_TRUE(help.ok()) << help.status();
  for (const char* flag : {"--engines", "--engine_cpus", "--connections"}) {
    EXPECT_TRUE(absl::StrContains(help->stdout_text, flag)) << flag;
  }
}

}  // namespace
}  // namespace longhaul::bridge_testing
