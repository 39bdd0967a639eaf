// longhaul-bridge end to end, data: a server bridge and a client bridge on 127.0.0.1
// (plaintext, and once with a pre-shared key) carry TCP connections from the test's
// application sockets to TCP targets in the test process. Streams of 0 B, 1 B,
// 64 KiB +- 1, 10 MiB and 1 GiB, uploads and downloads, arrive intact (every byte
// checked against the pattern) and end with a clean EOF on both sides; 20 streams of
// different sizes at once, also through longhaul-emu with loss and reordering; a
// half-close crosses either way first; a stalled reader holds up only its own stream; a
// client with the wrong key never connects. The bridges' metrics count what crossed.
// Every wait is bounded; processes are killed and targets joined by their handles'
// destructors.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/bridge/bridge_harness.h"
#include "tests/e2e/emu/emu_process.h"
#include "tests/e2e/perf/perf_process.h"
#include "tools/common/path_memory.h"

namespace longhaul::bridge_testing {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024, kGiB = 1024 * kMiB;
const std::vector<uint64_t> kSizes = {0, 1, 64 * kKiB - 1, 64 * kKiB + 1, 10 * kMiB};

void ExpectUploadIntact(const Upload& u, uint64_t n) {
  ASSERT_TRUE(u.connected);
  EXPECT_TRUE(u.sent) << "sending " << n << " bytes failed";
  EXPECT_EQ(u.reply.end, End::kEof) << EndName(u.reply.end) << " errno " << u.reply.err;
  EXPECT_EQ(u.reply.bytes, 16u) << "the sink's reply, then EOF";
  EXPECT_EQ(u.sink_bytes, n);
  EXPECT_EQ(u.sink_first_bad, ~0ULL) << "the sink saw a wrong byte at offset " << u.sink_first_bad;
}

void ExpectDownloadIntact(const Download& d, uint64_t n) {
  ASSERT_TRUE(d.connected);
  ExpectReadIntact(d.got, n);
}

enum class Direction { kUpload, kDownload };

// One stream of n bytes `dir` through `p` (its target a sink for an upload, a source for a
// download) arrives intact.
void ExpectCarriedIntact(BridgePair& p, Direction dir, uint64_t n) {
  if (dir == Direction::kUpload) {
    ExpectUploadIntact(DoUpload(p.client->tcp_port, n), n);
  } else {
    ExpectDownloadIntact(DoDownload(p.client->tcp_port, n), n);
  }
}

// One stream of each of kSizes `dir` through a fresh bridge pair, one after another, each
// intact. The target saw each end with EOF: an upload's sink after every byte (and its
// 16-byte reply), a download's source after the 8-byte request (the app's half-close) and
// everything sent. The bridges counted the bytes each way, completed every stream and
// reset none; after uploads the client also counts the streams opened, none left open and
// one session on each side.
void CarryEachSize(Direction dir) {
  const bool up = dir == Direction::kUpload;
  BridgePair p;
  ASSERT_TRUE(p.Start(up ? TargetMode::kSink : TargetMode::kSource));
  uint64_t total = 0;
  for (uint64_t n : kSizes) {
    SCOPED_TRACE(absl::StrCat(up ? "upload" : "download", " of ", n, " bytes"));
    ExpectCarriedIntact(p, dir, n);
    total += n;
  }
  std::vector<TargetConn> seen = p.target->WaitDone(kSizes.size(), milliseconds(10000));
  ASSERT_EQ(seen.size(), kSizes.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    if (up) {
      EXPECT_TRUE(seen[i].done);
    }
    EXPECT_EQ(seen[i].end, End::kEof) << i << ": " << EndName(seen[i].end);
    EXPECT_EQ(seen[i].bytes_in, up ? kSizes[i] : 8u);
    EXPECT_EQ(seen[i].bytes_out, up ? 16u : kSizes[i]);
  }
  // The bridge whose application side read the bytes, and the one that wrote them out.
  const Bridge& from_tcp = up ? *p.client : *p.server;
  const Bridge& to_tcp = up ? *p.server : *p.client;
  ExpectMetric(from_tcp, "longhaul_bridge_tcp_received_bytes_total", static_cast<double>(total));
  ExpectMetric(to_tcp, "longhaul_bridge_tcp_sent_bytes_total", static_cast<double>(total));
  const double streams = static_cast<double>(kSizes.size());
  if (up) {
    ExpectMetric(*p.client, "longhaul_bridge_streams_opened_total", streams);
    ExpectMetric(*p.client, "longhaul_bridge_tcp_sent_bytes_total", 16 * streams);
    ExpectMetric(*p.client, "longhaul_bridge_streams_open", 0);
    ExpectMetric(*p.client, "longhaul_bridge_sessions_open", 1);
    ExpectMetric(*p.server, "longhaul_bridge_sessions_open", 1);
  }
  ExpectCompletedWithoutResets(*p.client, *p.server, streams);
  p.Stop();
}

// One stream of n bytes `dir` through a fresh bridge pair (to a sink for an upload, from
// a source for a download) arrives intact; the target's only connection ended with EOF
// having read (upload) or written (download) n bytes, the bridge that wrote them to TCP
// counted them, and both bridges completed the stream without resets.
void CarryOneStream(Direction dir, uint64_t n) {
  const bool up = dir == Direction::kUpload;
  BridgePair p;
  ASSERT_TRUE(p.Start(up ? TargetMode::kSink : TargetMode::kSource));
  ExpectCarriedIntact(p, dir, n);
  std::optional<TargetConn> seen = WaitOnlyConnEof(*p.target);
  ASSERT_TRUE(seen);
  EXPECT_EQ(up ? seen->bytes_in : seen->bytes_out, n);
  ExpectMetric(up ? *p.server : *p.client, "longhaul_bridge_tcp_sent_bytes_total",
               static_cast<double>(n));
  ExpectCompletedWithoutResets(*p.client, *p.server, 1);
  p.Stop();
}

// A fresh pre-shared key written to `path` by longhaul-keygen.
void KeygenPsk(const std::string& path) {
  absl::StatusOr<emu::testing::RunResult> gen =
      emu::testing::RunToCompletion(LONGHAUL_KEYGEN_BIN, {"--psk=" + path}, milliseconds(20000));
  ASSERT_TRUE(gen.ok()) << gen.status();
  ASSERT_EQ(gen->status, 0) << gen->stderr_text;
}

TEST(BridgeE2E, UploadsOfEverySizeArriveIntact) { CarryEachSize(Direction::kUpload); }

TEST(BridgeE2E, DownloadsOfEverySizeArriveIntact) { CarryEachSize(Direction::kDownload); }

TEST(BridgeE2E, EmptyStreamBothWays) {
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kEcho));
  // Connect and half-close at once: the echo target sees EOF, half-closes, the app sees
  // EOF; not one byte either way.
  Exchange x = DoEchoExchange(p.client->tcp_port, 0, milliseconds(20000));
  ASSERT_TRUE(x.connected);
  EXPECT_EQ(x.got.end, End::kEof) << EndName(x.got.end) << " errno " << x.got.err;
  EXPECT_EQ(x.got.bytes, 0u);
  std::optional<TargetConn> seen = WaitOnlyConnEof(*p.target);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->bytes_in, 0u);
  ExpectCompleted(*p.client, *p.server, 1);
  p.Stop();
}

TEST(BridgeE2E, OneGibibyteUpload) { CarryOneStream(Direction::kUpload, kGiB); }

TEST(BridgeE2E, OneGibibyteDownload) { CarryOneStream(Direction::kDownload, kGiB); }

TEST(BridgeE2E, TwentyConcurrentStreamsOfDifferentSizes) {
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kEcho));
  constexpr int kStreams = 20;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < kStreams; ++i) {
    // 0 B up to 4 MiB and odd sizes around the 64 KiB chunk: 15 MiB each way in all.
    static constexpr uint64_t kSome[] = {
        0,          1,        1000,         64 * kKiB - 1, 64 * kKiB, 64 * kKiB + 1,
        300 * kKiB, 1 * kMiB, 2 * kMiB + 3, 4 * kMiB};
    sizes.push_back(kSome[i % 10] + (i >= 10 ? 7 * i : 0));
  }
  ExpectEchoesIntact(DoEchoExchanges(p.client->tcp_port, sizes, milliseconds(120000)), sizes);
  std::vector<TargetConn> seen = p.target->WaitDone(kStreams, milliseconds(10000));
  ASSERT_EQ(seen.size(), static_cast<size_t>(kStreams));
  for (const TargetConn& c : seen) EXPECT_EQ(c.end, End::kEof);
  ExpectNoStreamsOpen(*p.client, *p.server);
  ExpectCompletedWithoutResets(*p.client, *p.server, kStreams);
  p.Stop();
}

TEST(BridgeE2E, HalfCloseCrosses) {
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kReplyAfterEof));
  constexpr uint64_t kRequest = 300 * kKiB + 5;
  Fd app = ConnectTcp(p.client->tcp_port);
  ASSERT_TRUE(app.valid());
  ASSERT_TRUE(SendPattern(app.get(), kRequest));
  ASSERT_EQ(shutdown(app.get(), SHUT_WR), 0);
  // The target answers only after it has seen EOF: the reply proves the half-close
  // crossed while the other direction stayed open.
  ExpectReadIntact(ReadToEnd(app.get(), true, 0, Clock::now() + milliseconds(30000)), kRequest);
  std::optional<TargetConn> seen = WaitOnlyConnEof(*p.target);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->bytes_in, kRequest);
  EXPECT_EQ(seen->bytes_out, kRequest);
  ExpectCompleted(*p.client, *p.server, 1);
  p.Stop();
}

// The target finishes its side first (sends, half-closes); the application, having read
// everything and EOF, still uploads, and its upload arrives whole, ending with EOF.
TEST(BridgeE2E, TargetHalfClosesFirst) {
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kSource));
  Fd app = OpenDownload(p.client->tcp_port, 1000);
  ASSERT_TRUE(app.valid());
  ReadResult answer = ReadToEnd(app.get(), true, 0, Clock::now() + milliseconds(20000));
  ASSERT_EQ(answer.end, End::kEof) << EndName(answer.end);
  ASSERT_EQ(answer.bytes, 1000u);
  EXPECT_EQ(answer.first_bad, ~0ULL);
  ASSERT_TRUE(SendPattern(app.get(), 8 * kMiB));
  ASSERT_EQ(shutdown(app.get(), SHUT_WR), 0);
  std::optional<TargetConn> seen = WaitOnlyConnEof(*p.target, milliseconds(30000));
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->bytes_in, 8 + 8 * kMiB);
  ExpectCompletedWithoutResets(*p.client, *p.server, 1);
  p.Stop();
}

TEST(BridgeE2E, PreSharedKey) {
  TempDir dir;
  const std::string psk = dir.path() + "/link.psk";
  ASSERT_NO_FATAL_FAILURE(KeygenPsk(psk));
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kSink, {"--psk_file=" + psk}, {"--psk_file=" + psk}));
  std::optional<std::string> connected = p.client->WaitLine("connected to ", milliseconds(1000));
  ASSERT_TRUE(connected);
  EXPECT_FALSE(absl::StrContains(*connected, "insecure")) << *connected;
  EXPECT_FALSE(absl::StrContains(*connected, "plaintext")) << *connected;
  ExpectUploadIntact(DoUpload(p.client->tcp_port, 3 * kMiB + 1), 3 * kMiB + 1);
  p.Stop();
}

// The client's path memory: when it drains it writes what its connection measured under
// --peer; a client started again to that peer starts its connection from the record
// (docs/bridge.md, docs/congestion-control.md "Path memory").
TEST(BridgeE2E, PathMemoryRemembersThePeerAndTheNextClientStartsFromIt) {
  TempDir dir;
  const std::string file = dir.path() + "/cache/paths";
  BridgePair p;
  ASSERT_TRUE(p.Start(TargetMode::kSink, {}, {"--path_memory=" + file}));
  ExpectUploadIntact(DoUpload(p.client->tcp_port, 32 * kMiB), 32 * kMiB);
  StopBridge(*p.client);
  const std::string peer = absl::StrCat("127.0.0.1:", p.server->udp_port);
  const std::optional<PathRecord> r = PathMemory::LoadOrWarn(file).Find(peer, std::time(nullptr));
  ASSERT_TRUE(r.has_value()) << "nothing remembered for " << peer << " in " << file;
  EXPECT_GT(r->rate.bps(), 0);
  EXPECT_GT(r->min_rtt.ns(), 0);

  p.client = StartClient(p.server->udp_port, {"--path_memory=" + file}, /*metrics=*/true);
  ASSERT_TRUE(p.client);
  // Logged before the connection's handshake, which "connected to" (waited for) follows.
  const auto deadline = Clock::now() + milliseconds(5000);
  while (!absl::StrContains(p.client->Stderr(), "event=path_memory") && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  const std::string err = p.client->Stderr();
  EXPECT_TRUE(absl::StrContains(err, absl::StrCat("event=path_memory peer=", peer))) << err;
  EXPECT_TRUE(absl::StrContains(
      err, absl::StrCat("initial_rate_bps=", static_cast<int64_t>(r->rate.bps()) / 2)))
      << err;
  ExpectUploadIntact(DoUpload(p.client->tcp_port, kMiB), kMiB);
  p.Stop();
}

TEST(BridgeE2E, ClientWithTheWrongKeyNeverConnects) {
  TempDir dir;
  const std::string a = dir.path() + "/a.psk", b = dir.path() + "/b.psk";
  for (const std::string& f : {a, b}) ASSERT_NO_FATAL_FAILURE(KeygenPsk(f));
  Target sink(TargetMode::kSink);
  std::unique_ptr<Bridge> server =
      StartServer({"--psk_file=" + a, TargetFlag(sink.port())});
  ASSERT_TRUE(server);
  std::unique_ptr<Bridge> client = StartClient(
      server->udp_port, {"--psk_file=" + b, "--connect_timeout=1s", "--connect_wait=2s"},
      /*metrics=*/true, /*wait_connected=*/false);
  ASSERT_TRUE(client);
  double failures = NAN;
  EXPECT_TRUE(WaitMetric(
      client->metrics_port, "longhaul_bridge_connect_failures_total",
      [](double v) { return v >= 1; }, milliseconds(15000), &failures))
      << failures;
  // A TCP connection waits --connect_wait for a session that never comes, then is reset;
  // the target never hears of it.
  Fd app = ConnectTcp(client->tcp_port);
  ASSERT_TRUE(app.valid());
  ReadResult r = ReadToEnd(app.get(), false, 0, Clock::now() + milliseconds(15000));
  EXPECT_TRUE(r.end == End::kReset || r.end == End::kEof) << EndName(r.end);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(client->CountLines("connected to "), 0);
  EXPECT_EQ(sink.accepted(), 0u);
  double refused = NAN;
  EXPECT_TRUE(WaitMetric(
      client->metrics_port,
      "longhaul_bridge_streams_reset_total{reason=\"peer_unreachable\",by=\"local\"}",
      [](double v) { return v == 1; }, milliseconds(5000), &refused))
      << refused;
  StopBridge(*client);
  StopBridge(*server);
}

// Flow control is per stream: an application that stops reading a download holds up
// that stream only. Another stream (another forward) runs to completion meanwhile, and
// the stalled download, read at last, is intact.
TEST(BridgeE2E, StalledReaderHoldsUpOnlyItsOwnStream) {
  Target echo(TargetMode::kEcho), source(TargetMode::kSource);
  TempDir dir;
  ReservedTcpPort src_port;
  const std::string server_fwd =
      dir.Write("server.fwd", absl::StrCat("src 127.0.0.1:", source.port(), "\n"));
  const std::string client_fwd =
      dir.Write("client.fwd", absl::StrCat("src 127.0.0.1:", src_port.port(), "\n"));
  const std::vector<std::string> window = {"--stream_window=1MiB", "--memory=4MiB"};
  std::vector<std::string> sf = {TargetFlag(echo.port()),
                                 "--forwards=" + server_fwd};
  sf.insert(sf.end(), window.begin(), window.end());
  std::unique_ptr<Bridge> server = StartServer(sf, /*metrics=*/true);
  ASSERT_TRUE(server);
  std::vector<std::string> cf = {"--forwards=" + client_fwd};
  cf.insert(cf.end(), window.begin(), window.end());
  std::unique_ptr<Bridge> client = StartClient(server->udp_port, cf, /*metrics=*/true);
  ASSERT_TRUE(client);

  constexpr uint64_t kStalled = 128 * kMiB;
  Fd stalled = OpenDownload(src_port.port(), kStalled);
  ASSERT_TRUE(stalled.valid());
  ASSERT_EQ(shutdown(stalled.get(), SHUT_WR), 0);
  // Not read: the source fills the socket buffers and the stream's window, then waits.
  double carried = NAN;
  ASSERT_TRUE(WaitMetric(
      client->metrics_port, "longhaul_bridge_tcp_sent_bytes_total",
      [](double v) { return v >= 1 * kMiB; }, milliseconds(20000), &carried))
      << carried;

  Exchange other = DoEchoExchange(client->tcp_port, 16 * kMiB, milliseconds(60000));
  ASSERT_TRUE(other.connected);
  ExpectReadIntact(other.got, 16 * kMiB);
  // The stalled download is still open (not reset), and far from done.
  std::vector<TargetConn> downloading = source.WaitDone(1, milliseconds(0));
  ASSERT_EQ(downloading.size(), 1u);
  EXPECT_FALSE(downloading[0].done);
  EXPECT_LT(FetchMetrics(client->metrics_port)["longhaul_bridge_tcp_sent_bytes_total"],
            static_cast<double>(kStalled));

  ExpectReadIntact(ReadToEnd(stalled.get(), true, 0, Clock::now() + milliseconds(120000)),
                   kStalled);
  ExpectMetric(*client, "longhaul_bridge_streams_completed_total", 2);
  ExpectMetric(*client, "longhaul_bridge_protocol_errors_total", 0);
  ExpectNoResets(*client);
  ExpectNoResets(*server);
  StopBridge(*client);
  StopBridge(*server);
}

// Through longhaul-emu with loss and reordering: a lost packet holds back only its own
// frame, so frames of a stream arrive out of order and each stream puts its own back in
// order. 20 streams at once, all intact.
TEST(BridgeE2E, ConcurrentStreamsOverALossyReorderingLink) {
  if (access(LONGHAUL_EMU_BIN, X_OK) != 0) GTEST_SKIP() << "no " << LONGHAUL_EMU_BIN;
  Target echo(TargetMode::kEcho);
  std::unique_ptr<Bridge> server = StartServerFor(echo.port());
  ASSERT_TRUE(server);
  perf_testing::EmuRelay relay = perf_testing::StartEmuRelay(
      LONGHAUL_EMU_BIN, "rate=400mbit,rtt=4ms,loss=2e-2,reorder=5e-2,reorder_delay=2ms",
      server->udp_port, {"--seed=7"});
  ASSERT_GT(relay.port, 0);
  std::unique_ptr<Bridge> client = StartClient(relay.port, {}, /*metrics=*/true);
  ASSERT_TRUE(client);
  constexpr int kStreams = 20;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < kStreams; ++i) sizes.push_back((i % 5) * 300 * kKiB + 17 * i);
  ExpectEchoesIntact(DoEchoExchanges(client->tcp_port, sizes, milliseconds(120000)), sizes);
  // The link did lose packets (the test tested something).
  double lost = NAN;
  EXPECT_TRUE(WaitMetric(
      client->metrics_port,
      absl::StrCat("longhaul_bridge_session_packets_lost_total{peer=\"127.0.0.1:", relay.port,
                   "\",connection=\"0\",engine=\"0\"}"),
      [](double v) { return v > 0; }, milliseconds(5000), &lost))
      << lost;
  ExpectMetric(*client, "longhaul_bridge_protocol_errors_total", 0);
  ExpectMetric(*server, "longhaul_bridge_protocol_errors_total", 0);
  ExpectCompletedWithoutResets(*client, *server, kStreams);
  StopBridge(*client);
  StopBridge(*server);
  relay.proc->Signal(SIGTERM);
  EXPECT_TRUE(relay.proc->Wait(milliseconds(10000)).ok());
}

}  // namespace
}  // namespace longhaul::bridge_testing
