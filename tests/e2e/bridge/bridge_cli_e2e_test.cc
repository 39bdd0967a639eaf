// longhaul-bridge's command line end to end: usage, flag, forwards-file and key errors
// exit 2 with a message naming the problem on stderr; a port in use exits 1 with
// "cannot listen" (or "cannot serve metrics"); a plain longhaul-perf client is refused
// by a server bridge with a message saying it is not a longhaul-bridge client, and the
// server keeps serving bridge clients. Every run is bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <memory>
#include <string>
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

RunResult RunBridge(const std::vector<std::string>& args) {
  absl::StatusOr<RunResult> r = RunToCompletion(LONGHAUL_BRIDGE_BIN, args, milliseconds(20000));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RunResult{};
}

struct UsageCase {
  std::vector<std::string> args;
  std::string message;  // a part of stderr
};

TEST(BridgeCliE2E, UsageErrorsExit2NamingTheProblem) {
  TempDir dir;
  const std::string bad_fwd = dir.Write("bad.fwd", "# ok so far\ndb 127.0.0.1:5432\nlonely\n");
  const std::string dup_fwd = dir.Write("dup.fwd", "\ndefault 127.0.0.1:5\n");
  const std::string port0_fwd = dir.Write("port0.fwd", "db 127.0.0.1:0\n");
  const std::string missing = dir.path() + "/missing.fwd";
  // Trust: a forwards file others may change decides where streams go.
  const std::string open_fwd = dir.Write("open.fwd", "db 127.0.0.1:5432\n");
  EXPECT_EQ(chmod(open_fwd.c_str(), 0664), 0);
  const std::string listen = "--listen=127.0.0.1:0";
  const std::string peer = "--peer=127.0.0.1:9";
  const std::string target = "--target=127.0.0.1:9";
  const std::vector<UsageCase> cases = {
      {{}, "the first argument must be the mode: client or server"},
      {{"--insecure"}, "the first argument must be the mode: client or server"},
      {{"proxy", "--insecure", listen, peer},
       "the first argument must be the mode: client or server"},
      {{"client", "--insecure", listen},
       "client: --peer=HOST:PORT (the server bridge) is required"},
      {{"server", "--insecure", listen},
       "server: --target=HOST:PORT or --forwards=FILE is required"},
      {{"client", "--insecure", peer}, "--listen=ADDR:PORT is required"},
      {{"client", "--insecure", listen, peer, target},
       "--target is the server's; the client takes --peer"},
      {{"server", "--insecure", listen, target, peer},
       "--peer is the client's; the server takes --target"},
      {{"client", "--insecure", "--listen=nope", peer}, "--listen: bad address 'nope'"},
      {{"client", "--insecure", listen, "--peer=127.0.0.1"}, "--peer: bad address '127.0.0.1'"},
      {{"client", "--insecure", listen, "--peer=127.0.0.1:0"}, "--peer: give a port"},
      {{"server", "--insecure", listen, "--target=127.0.0.1:0"}, "--target: give a port"},
      {{"server", "--insecure", listen, "--target=[::1"}, "--target: bad address '[::1'"},
      {{"client", "--insecure", listen, peer, "--metrics=localhost"}, "--metrics: bad address"},
      {{"client", "--insecure", listen, peer, "--forwards=" + bad_fwd},
       bad_fwd + ":3: expected 'NAME ADDRESS:PORT', got 'lonely'"},
      {{"server", "--insecure", listen, "--forwards=" + port0_fwd},
       port0_fwd + ":1: port 0 in '127.0.0.1:0': give a port"},
      {{"server", "--insecure", listen, target, "--forwards=" + dup_fwd},
       dup_fwd + ":2: forward 'default' is already defined at --target"},
      {{"client", "--insecure", listen, peer, "--forwards=" + missing},
       "--forwards: cannot read " + missing + ": No such file or directory"},
      {{"client", "--insecure", listen, peer, "--forwards=" + open_fwd},
       "--forwards: " + open_fwd + " is writable by its group (mode 0664): chmod go-w " +
           open_fwd},
      {{"client", listen, peer},
       "no keys: give --key and --peer_key, or --psk_file, or --insecure"},
      {{"server", listen, target},
       "no keys: give --key and --peer_key, or --psk_file, or --insecure"},
      {{"client", listen, peer, "--psk_file=" + missing}, missing},
      {{"client", "--insecure", listen, peer, "--stream_window=1KiB"},
       "--stream_window must be at least 65536 bytes"},
      {{"client", "--insecure", listen, peer, "--stream_window=lots"}, "--stream_window: "},
      {{"client", "--insecure", listen, peer, "--stream_window=2MiB", "--memory=1MiB"},
       "--memory must be >= --stream_window"},
      {{"client", "--insecure", listen, peer, "--send_memory=1KiB"},
       "--send_memory must be at least 1MiB"},
      {{"client", "--insecure", listen, peer, "--max_streams=0"}, "--max_streams must be >= 1"},
      {{"client", "--insecure", listen, peer, "--connect_wait=0s"}, "--connect_wait must be > 0"},
      {{"server", "--insecure", listen, target, "--target_timeout=soon"}, "--target_timeout: "},
      {{"client", "--insecure", listen, peer, "--bogus=1"}, "unknown flag '--bogus'"},
      {{"client", "--insecure", listen, peer, "--send_backlog=10us"},
       "--send_backlog must be in [100us, 1s]"},
      {{"client", "--insecure", listen, peer, "--bulk_send_backlog=2s"},
       "--bulk_send_backlog must be in [100us, 1s]"},
      {{"server", "--insecure", listen, target, "--memory_per_key=1MiB"},
       "--memory_per_key must be at least 4MiB"},
      {{"server", "--insecure", listen, target, "--memory_per_key=lots"}, "--memory_per_key: "},
      {{"server", "--insecure", listen, target, "--memory_per_key=1GiB", "--memory_total=512MiB"},
       "--memory_total must be >= --memory_per_key"},
      {{"server", "--insecure", listen, target, "--targets_per_key=0"},
       "--targets_per_key must be >= 1"},
      {{"server", "--insecure", listen, target, "--targets_per_key=100", "--targets_total=10"},
       "--targets_total must be >= --targets_per_key"},
      {{"server", "--insecure", listen, target, "--sessions_per_key=0"},
       "--sessions_per_key must be >= 1"},
  };
  for (const UsageCase& c : cases) {
    SCOPED_TRACE(absl::StrCat("longhaul-bridge ", absl::StrJoin(c.args, " ")));
    RunResult r = RunBridge(c.args);
    EXPECT_EQ(r.status, 2) << r.stderr_text;
    EXPECT_TRUE(absl::StrContains(r.stderr_text, c.message))
        << "stderr: " << r.stderr_text << "\nwanted: " << c.message;
    EXPECT_TRUE(absl::StartsWith(r.stderr_text, "longhaul-bridge: ")) << r.stderr_text;
    EXPECT_TRUE(r.stdout_text.empty()) << r.stdout_text;
  }
}

TEST(BridgeCliE2E, HelpExits0) {
  RunResult r = RunBridge({"--help"});
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "usage: longhaul-bridge client")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "--stream_window")) << r.stdout_text;
}

TEST(BridgeCliE2E, PortInUseExits1) {
  TcpListener busy;
  const std::string at = absl::StrCat("127.0.0.1:", busy.port);
  // The client's TCP listen port.
  RunResult r = RunBridge({"client", "--insecure", "--listen=" + at, "--peer=127.0.0.1:9"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "cannot listen on " + at)) << r.stderr_text;
  // A forwards file's listen port, named with its line.
  TempDir dir;
  const std::string fwd = dir.Write("f.fwd", absl::StrCat("# x\nbusy ", at, "\n"));
  r = RunBridge(
      {"client", "--insecure", "--listen=127.0.0.1:0", "--peer=127.0.0.1:9", "--forwards=" + fwd});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text,
                                "cannot listen on " + at + " (forward 'busy', " + fwd + ":2)"))
      << r.stderr_text;
  // The metrics port.
  r = RunBridge(
      {"server", "--insecure", "--listen=127.0.0.1:0", "--target=127.0.0.1:9", "--metrics=" + at});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "cannot serve metrics on " + at)) << r.stderr_text;
  // The server's UDP port.
  std::unique_ptr<Bridge> first = StartServer({"--target=127.0.0.1:9"});
  ASSERT_TRUE(first);
  const std::string udp = absl::StrCat("127.0.0.1:", first->udp_port);
  r = RunBridge({"server", "--insecure", "--listen=" + udp, "--target=127.0.0.1:9"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "cannot listen on " + udp)) << r.stderr_text;
  StopBridge(*first);
}

TEST(BridgeCliE2E, PerfClientIsRefusedByAServerBridge) {
  Target sink(TargetMode::kSink);
  std::unique_ptr<Bridge> server = StartServerFor(sink.port());
  ASSERT_TRUE(server);
  absl::StatusOr<RunResult> perf = RunToCompletion(
      LONGHAUL_PERF_BIN,
      {"--client=127.0.0.1", absl::StrCat("--port=", server->udp_port), "--insecure", "--time=1"},
      milliseconds(30000));
  ASSERT_TRUE(perf.ok()) << perf.status();
  EXPECT_NE(perf->status, 0) << perf->stdout_text;
  EXPECT_TRUE(absl::StrContains(perf->stderr_text, "not a longhaul-bridge client"))
      << perf->stderr_text;
  EXPECT_EQ(sink.accepted(), 0u);
  ExpectMetric(*server, "longhaul_bridge_sessions_opened_total", 0);
  // The server still serves bridge clients.
  std::unique_ptr<Bridge> client = StartClient(server->udp_port, {});
  ASSERT_TRUE(client);
  Upload u = DoUpload(client->tcp_port, 4321);
  EXPECT_EQ(u.reply.end, End::kEof);
  EXPECT_EQ(u.sink_bytes, 4321u);
  StopBridge(*client);
  StopBridge(*server);
}

// GET /metrics answers 200 with the Prometheus text; other paths 404, other methods 405.
TEST(BridgeCliE2E, MetricsEndpointAnswersGetMetricsOnly) {
  std::unique_ptr<Bridge> server = StartServer({"--target=127.0.0.1:9"}, /*metrics=*/true);
  ASSERT_TRUE(server);
  auto ask = [&](const std::string& request) {
    Fd fd = ConnectTcp(server->metrics_port);
    EXPECT_TRUE(fd.valid());
    if (!fd.valid()) return std::string();
    EXPECT_TRUE(SendAll(fd.get(), request.data(), request.size()));
    ReadResult r = ReadToEnd(fd.get(), false, 1 << 20, Clock::now() + milliseconds(10000));
    EXPECT_EQ(r.end, End::kEof) << EndName(r.end);
    return r.data;
  };
  const std::string ok = ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(ok, "HTTP/1.0 200 OK\r\n")) << ok;
  EXPECT_TRUE(absl::StrContains(ok, "Content-Type: text/plain; version=0.0.4")) << ok;
  EXPECT_TRUE(absl::StrContains(ok, "\nlonghaul_bridge_info{mode=\"server\"} 1\n")) << ok;
  const size_t body = ok.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_TRUE(absl::StrContains(ok, absl::StrCat("Content-Length: ", ok.size() - body - 4, "\r\n")))
      << ok.substr(0, body);
  EXPECT_TRUE(absl::StartsWith(ask("GET /other HTTP/1.0\r\n\r\n"), "HTTP/1.0 404 ")) << "404";
  EXPECT_TRUE(absl::StartsWith(ask("POST /metrics HTTP/1.0\r\n\r\n"), "HTTP/1.0 405 ")) << "405";
  // Still serving after all that.
  EXPECT_FALSE(FetchMetrics(server->metrics_port).empty());
  StopBridge(*server);
}

}  // namespace
}  // namespace longhaul::bridge_testing
