// longhaul-perf end to end: server and client processes on 127.0.0.1 with kernel-chosen
// ports, directly and through longhaul-emu (loss, reordering, duplication, corruption).
// Also a hostile neighbourhood for the server: garbage datagrams, forged cookies, bad
// test requests, a client killed mid-transfer; the server must keep serving. Plaintext
// (--insecure) throughout: the forged handshakes here are plaintext ones; protected
// transfers, wrong keys and captures are tests/e2e/security's.
// Every wait is bounded; processes are killed and reaped by their handles' destructors.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"
#include "tests/e2e/perf/perf_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/udp_ports.h"
#include "tools/common/path_memory.h"
#include "transport/api/endpoint.h"
#include "transport/endpoint/handshake.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

using emu::testing::EmuProcess;
using emu::testing::RunResult;
using emu::testing::RunToCompletion;
using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kStart(10000);

bool EmuAvailable() { return access(LONGHAUL_EMU_BIN, X_OK) == 0; }

using Server = perf_testing::PerfServer;
using ClientRun = perf_testing::PerfRun;

Server StartServer(std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), "--insecure");
  return perf_testing::StartPerfServer(LONGHAUL_PERF_BIN, extra);
}

// Stops the server with SIGTERM; it must exit cleanly (it never crashed meanwhile).
void StopServer(Server& s) { perf_testing::StopPerfServer(s); }

ClientRun RunClient(int port, std::vector<std::string> extra) {
  extra.insert(extra.begin(), "--insecure");
  return perf_testing::RunPerfClient(LONGHAUL_PERF_BIN, port, extra);
}

// The checks every successful run must pass: exit 0, bytes verified, nothing corrupt, and
// the iperf3-shaped fields present.
void ExpectIntact(const ClientRun& c) {
  ASSERT_EQ(c.status, 0) << c.out << "\nstderr: " << c.err;
  ASSERT_TRUE(c.json.is_object()) << c.out;
  const Json& end = c.json["end"];
  EXPECT_GT(end["sum_received"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(end["sum_received"]["bytes"], end["sum_sent"]["bytes"]);
  EXPECT_GT(end["sum_received"]["bits_per_second"].get<double>(), 0);
  EXPECT_EQ(end["longhaul"]["integrity"]["corrupt_messages"].get<uint64_t>(), 0u);
  EXPECT_TRUE(end["longhaul"]["integrity"]["intact"].get<bool>());
  EXPECT_TRUE(c.json["start"].contains("test_start"));
  EXPECT_FALSE(c.json["intervals"].empty());
}

TEST(PerfE2E, ForwardReverseParallelAndBytes) {
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  ClientRun fwd = RunClient(s.port, {"--time=1", "--rate=1gbit", "--interval=0.25"});
  ExpectIntact(fwd);
  ClientRun rev = RunClient(s.port, {"--time=1", "--rate=1gbit", "--reverse"});
  ExpectIntact(rev);
  EXPECT_EQ(rev.json["start"]["test_start"]["reverse"], 1);
  ClientRun par = RunClient(s.port, {"--bytes=20MiB", "--rate=2gbit", "--parallel=3",
                                     "--message_size=100000", "--flows=2"});
  ExpectIntact(par);
  EXPECT_EQ(par.json["end"]["sum_received"]["bytes"].get<uint64_t>(), uint64_t{3} * (20 << 20));
  EXPECT_EQ(par.json["end"]["streams"].size(), 3u);
  EXPECT_EQ(par.json["end"]["longhaul"]["params"]["flows"], 2);
  // The server served all three tests, in order, and reported each as intact.
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Json> t = s.proc->WaitEvent("test", kStart);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE((*t)["intact"].get<bool>()) << t->dump();
  }
  StopServer(s);
}

TEST(PerfE2E, MessagesWorkloadReportsCompletionTimes) {
  Server s = StartServer();
  ClientRun m = RunClient(s.port, {"--time=1", "--rate=1gbit", "--workload=messages",
                                   "--message_size=64KiB", "--load=0.3"});
  ExpectIntact(m);
  const Json& end = m.json["end"];
  for (const char* k :
       {"mct_mean_s", "mct_p50_s", "mct_p99_s", "mct_p999_s", "mct_max_s", "mct_ideal_s"}) {
    ASSERT_TRUE(end.contains(k)) << k;
    EXPECT_GT(end[k].get<double>(), 0) << k;
  }
  EXPECT_GT(end["messages"].get<uint64_t>(), 100u);
  EXPECT_LE(end["mct_p50_s"].get<double>(), end["mct_max_s"].get<double>());
  StopServer(s);
}

// A newcomer's client gives no rate: the test runs cc=bbr with no cap (a fixed guess
// would flood a slower link or waste a faster one); --rate alone keeps the fixed
// controller; the messages workload, whose schedule needs a rate, says so.
TEST(PerfE2E, WithoutARateOrProfileTheClientRunsBbr) {
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  ClientRun bbr = RunClient(s.port, {"--bytes=32MiB", "--interval=0.02"});
  ExpectIntact(bbr);
  const Json& params = bbr.json["end"]["longhaul"]["params"];
  EXPECT_EQ(params["cc"], "bbr") << params.dump();
  EXPECT_EQ(params["rate_bps"].get<double>(), 0) << params.dump();
  EXPECT_EQ(bbr.json["end"]["sum_received"]["bytes"].get<uint64_t>(), uint64_t{32} << 20);

  ClientRun fixed = RunClient(s.port, {"--bytes=8MiB", "--rate=2gbit", "--interval=0.02"});
  ExpectIntact(fixed);
  EXPECT_EQ(fixed.json["end"]["longhaul"]["params"]["cc"], "fixed");
  EXPECT_EQ(fixed.json["end"]["longhaul"]["params"]["rate_bps"].get<double>(), 2e9);

  ClientRun messages = RunClient(s.port, {"--time=1", "--workload=messages"});
  EXPECT_EQ(messages.status, 2) << messages.out << messages.err;
  EXPECT_NE(messages.err.find("--workload=messages needs the link rate"), std::string::npos)
      << messages.err;
  StopServer(s);
}

// The path memory: a forward bbr test writes what it measured under the peer; the next
// one to that peer starts at half of it (--initial_rate's mechanism); --initial_rate,
// --reverse and --path_memory=off leave the start alone; a file with garbage is read
// past with a warning.
TEST(PerfE2E, PathMemoryStartsTheNextTestAtHalfTheMeasuredRate) {
  ::longhaul::testing::TempDir tmp("longhaul-perf-paths");
  ASSERT_TRUE(tmp.ok());
  const std::string file = tmp.Path("cache/paths");
  const std::string flag = absl::StrCat("--path_memory=", file);
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  ClientRun first = RunClient(s.port, {"--bytes=32MiB", "--interval=0.02", flag});
  ExpectIntact(first);
  const Json& pm1 = first.json["end"]["longhaul"]["path_memory"];
  EXPECT_EQ(pm1["peer"], absl::StrCat("127.0.0.1:", s.port)) << pm1.dump();
  EXPECT_EQ(pm1["initial_rate_bps"].get<double>(), 0) << pm1.dump();
  const PathMemory after1 = PathMemory::LoadOrWarn(file);
  const std::optional<PathRecord> rec =
      after1.Find(absl::StrCat("127.0.0.1:", s.port), std::time(nullptr));
  ASSERT_TRUE(rec.has_value()) << "nothing remembered in " << file;
  EXPECT_GT(rec->rate.bps(), 0);

  ClientRun second = RunClient(s.port, {"--bytes=32MiB", "--interval=0.02", flag});
  ExpectIntact(second);
  const Json& pm2 = second.json["end"]["longhaul"]["path_memory"];
  EXPECT_DOUBLE_EQ(pm2["remembered_bps"].get<double>(), std::floor(rec->rate.bps()));
  EXPECT_DOUBLE_EQ(pm2["initial_rate_bps"].get<double>(), pm2["remembered_bps"].get<double>() / 2);
  EXPECT_DOUBLE_EQ(second.json["end"]["longhaul"]["params"]["initial_rate_bps"].get<double>(),
                   pm2["initial_rate_bps"].get<double>());

  ClientRun own = RunClient(s.port, {"--bytes=8MiB", "--interval=0.02", flag, "--initial_rate=10mbit"});
  ExpectIntact(own);
  EXPECT_EQ(own.json["end"]["longhaul"]["path_memory"]["initial_rate_bps"].get<double>(), 0);
  EXPECT_EQ(own.json["end"]["longhaul"]["params"]["initial_rate_bps"].get<double>(), 10e6);
  ClientRun rev = RunClient(s.port, {"--bytes=8MiB", "--interval=0.02", flag, "--reverse"});
  ExpectIntact(rev);
  EXPECT_FALSE(rev.json["end"]["longhaul"].contains("path_memory"));
  ClientRun off = RunClient(s.port, {"--bytes=8MiB", "--interval=0.02", "--path_memory=off"});
  ExpectIntact(off);
  EXPECT_FALSE(off.json["end"]["longhaul"].contains("path_memory"));
  EXPECT_EQ(off.json["end"]["longhaul"]["params"]["initial_rate_bps"].get<double>(), 0);

  const std::string garbage = tmp.Write("garbage", "not a record\n127.0.0.1:1 fast 1 1\n");
  ClientRun bad = RunClient(s.port, {"--bytes=8MiB", "--interval=0.02", absl::StrCat("--path_memory=", garbage)});
  ExpectIntact(bad);
  EXPECT_NE(bad.err.find("2 lines that do not parse skipped"), std::string::npos) << bad.err;
  StopServer(s);
}

TEST(PerfE2E, ConnectToAClosedPortFailsClearly) {
  const int port = testing::UnusedUdpPort();
  absl::StatusOr<RunResult> r = RunToCompletion(
      LONGHAUL_PERF_BIN,
      {"--client=127.0.0.1", absl::StrCat("--port=", port), "--time=1", "--insecure"},
      milliseconds(30000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 1);
  EXPECT_NE(r->stderr_text.find("refused"), std::string::npos) << r->stderr_text;
}

TEST(PerfE2E, BadFlagsExitWithUsageError) {
  absl::StatusOr<RunResult> r =
      RunToCompletion(LONGHAUL_PERF_BIN, {"--client=127.0.0.1", "--message_size=3", "--insecure"},
                      milliseconds(30000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 2);
  EXPECT_NE(r->stderr_text.find("message_size"), std::string::npos) << r->stderr_text;
}

TEST(PerfE2E, SendQuantumOutOfRangeIsAUsageError) {
  for (const char* bad : {"--send_quantum=2MiB", "--send_quantum=lots"}) {
    absl::StatusOr<RunResult> r = RunToCompletion(
        LONGHAUL_PERF_BIN, {"--client=127.0.0.1", bad, "--insecure"}, milliseconds(30000));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 2) << bad;
    EXPECT_NE(r->stderr_text.find("--send_quantum"), std::string::npos) << r->stderr_text;
  }
}

// Two engines a side, four connections: the client places them in turn (two on each of
// its engines) and counts them in its connection ids' top byte, which steers each Hello
// to server engine (count % 2): two on each of the server's engines too.
TEST(PerfE2E, EnginesSpreadParallelConnectionsAndReportPerEngine) {
  Server s = StartServer({"--engines=2"});
  ASSERT_GT(s.port, 0);
  EXPECT_EQ(s.listening["engines"], 2) << s.listening.dump();
  // 8 MiB at 1 Gbit/s a connection lasts over 60 ms: several 20 ms intervals.
  ClientRun c = RunClient(s.port, {"--engines=2", "--parallel=4", "--bytes=8MiB",
                                   "--rate=1gbit", "--message_size=256KiB", "--interval=0.02"});
  ExpectIntact(c);
  EXPECT_EQ(c.json["end"]["sum_received"]["bytes"].get<uint64_t>(), uint64_t{4} * (8 << 20));
  const Json& mine = c.json["end"]["longhaul"]["engines"];
  ASSERT_TRUE(mine.is_array()) << c.json["end"]["longhaul"].dump();
  ASSERT_EQ(mine.size(), 2u) << mine.dump();
  for (size_t e = 0; e < mine.size(); ++e) {
    SCOPED_TRACE(::testing::Message() << "client engine " << e << ": " << mine[e].dump());
    EXPECT_EQ(mine[e]["index"], e);
    EXPECT_EQ(mine[e]["connections"], 2);
    EXPECT_GT(mine[e]["bytes_sent"].get<uint64_t>(), uint64_t{2} * (8 << 20));
    EXPECT_GT(mine[e]["bytes_received"].get<uint64_t>(), 0u);
    EXPECT_GT(mine[e]["datagrams_sent"].get<uint64_t>(), 0u);
    EXPECT_GT(mine[e]["datagrams_received"].get<uint64_t>(), 0u);
    EXPECT_GE(mine[e]["cpu_s"].get<double>(), 0.0);
  }
  absl::StatusOr<Json> t = s.proc->WaitEvent("test", kStart);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE((*t)["intact"].get<bool>()) << t->dump();
  const Json& theirs = (*t)["engines"];
  ASSERT_TRUE(theirs.is_array()) << t->dump();
  ASSERT_EQ(theirs.size(), 2u) << theirs.dump();
  uint64_t connections = 0, received = 0;
  for (size_t e = 0; e < theirs.size(); ++e) {
    SCOPED_TRACE(::testing::Message() << "server engine " << e << ": " << theirs[e].dump());
    EXPECT_EQ(theirs[e]["index"], e);
    EXPECT_EQ(theirs[e]["connections"], 2);
    EXPECT_GT(theirs[e]["bytes_received"].get<uint64_t>(), uint64_t{2} * (8 << 20));
    EXPECT_GT(theirs[e]["bytes_sent"].get<uint64_t>(), 0u);
    EXPECT_GT(theirs[e]["datagrams_received"].get<uint64_t>(), 0u);
    connections += theirs[e]["connections"].get<uint64_t>();
    received += theirs[e]["bytes_received"].get<uint64_t>();
  }
  EXPECT_EQ(connections, 4u);
  EXPECT_GT(received, uint64_t{4} * (8 << 20));
  StopServer(s);
}

TEST(PerfE2E, BadEngineFlagsAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--client=127.0.0.1", "--engines=65"}, "--engines"},
      {{"--server", "--engines=-1"}, "--engines"},
      {{"--client=127.0.0.1", "--engine_cpus=x"}, "--engine_cpus"},
      {{"--server", "--engine_cpus=0,,1"}, "--engine_cpus"},
  };
  for (const auto& [args, flag] : cases) {
    std::vector<std::string> argv = args;
    argv.push_back("--insecure");
    absl::StatusOr<RunResult> r = RunToCompletion(LONGHAUL_PERF_BIN, argv, milliseconds(30000));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << args[1] << ": " << r->stderr_text;
    EXPECT_NE(r->stderr_text.find(flag), std::string::npos) << r->stderr_text;
  }
}

int UdpSocketTo(int port) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  return fd;
}

std::optional<std::vector<uint8_t>> Receive(int fd, int ms) {
  return emu::testing::RecvWithTimeout(fd, milliseconds(ms));
}

// Garbage of every kind, then forged cookies; the server answers nothing but a Retry to a
// proper Hello, never accepts a forged cookie, and then serves a normal test.
TEST(PerfE2E, ServerSurvivesGarbageAndRejectsForgedCookies) {
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  int fd = UdpSocketTo(s.port);
  std::mt19937_64 rng(7);
  // Random datagrams of random sizes.
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> d(1 + rng() % 9000);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    send(fd, d.data(), d.size(), 0);
  }
  // Plausible headers: right version, every packet type, random connection ids, with and
  // without a valid checksum, and truncated ones.
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> d(64 + rng() % 2000);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    wire::PacketWriter w(d.data(), d.size());
    wire::PacketHeader h;
    h.type = static_cast<wire::PacketType>(rng() % 4);
    h.connection_id = rng();
    h.packet_number = rng() % 1000;
    w.WriteHeader(h);
    w.WritePing();
    if (i % 2 == 0) w.WritePadding(w.remaining());
    size_t n = (i % 3 == 0) ? d.size() : w.Finish();
    if (i % 5 == 0) n = std::min<size_t>(n, 10);
    send(fd, d.data(), n, 0);
  }
  // A proper Hello gets a Retry, whatever came before.
  const endpoint::HandshakeMessage hello{.kind = endpoint::HandshakeKind::kHello,
                                         .client_cid = 99,
                                         .params = {8192, 8270, 1 << 30, 65536, 1, 30000}};
  absl::StatusOr<std::vector<uint8_t>> pkt = endpoint::BuildHandshakePacket(hello);
  ASSERT_TRUE(pkt.ok());
  std::optional<std::vector<uint8_t>> retry_bytes;
  for (int attempt = 0; attempt < 5 && !retry_bytes; ++attempt) {
    send(fd, pkt->data(), pkt->size(), 0);
    // Skip anything that is not a Retry (there should be nothing else).
    while (auto r = Receive(fd, 2000)) {
      absl::StatusOr<endpoint::HandshakeMessage> m = endpoint::ParseHandshakePacket(*r);
      if (m.ok() && m->kind == endpoint::HandshakeKind::kRetry) {
        retry_bytes = r;
        break;
      }
    }
  }
  ASSERT_TRUE(retry_bytes.has_value());
  EXPECT_LE(retry_bytes->size(), 3 * pkt->size());  // amplification bound
  absl::StatusOr<endpoint::HandshakeMessage> retry = endpoint::ParseHandshakePacket(*retry_bytes);
  ASSERT_TRUE(retry.ok());
  // Forged cookies: random, and the real one with a bit flipped. No Accept may come back.
  for (int i = 0; i < 20; ++i) {
    endpoint::HandshakeMessage forged = hello;
    forged.cookie = retry->cookie;
    if (i == 0) {
      forged.cookie.back() ^= 0x01;
    } else {
      for (auto& b : forged.cookie) b = static_cast<uint8_t>(rng());
    }
    absl::StatusOr<std::vector<uint8_t>> f = endpoint::BuildHandshakePacket(forged);
    ASSERT_TRUE(f.ok());
    send(fd, f->data(), f->size(), 0);
  }
  // The genuine cookie from another client id is also forged for that id.
  endpoint::HandshakeMessage stolen = hello;
  stolen.client_cid = 100;
  stolen.cookie = retry->cookie;
  absl::StatusOr<std::vector<uint8_t>> st = endpoint::BuildHandshakePacket(stolen);
  send(fd, st->data(), st->size(), 0);
  while (auto r = Receive(fd, 500)) {
    absl::StatusOr<endpoint::HandshakeMessage> m = endpoint::ParseHandshakePacket(*r);
    ASSERT_TRUE(!m.ok() || m->kind != endpoint::HandshakeKind::kAccept) << "forged cookie accepted";
  }
  // The genuine cookie is accepted.
  endpoint::HandshakeMessage good = hello;
  good.cookie = retry->cookie;
  absl::StatusOr<std::vector<uint8_t>> g = endpoint::BuildHandshakePacket(good);
  send(fd, g->data(), g->size(), 0);
  bool accepted = false;
  while (auto r = Receive(fd, 3000)) {
    absl::StatusOr<endpoint::HandshakeMessage> m = endpoint::ParseHandshakePacket(*r);
    if (m.ok() && m->kind == endpoint::HandshakeKind::kAccept) {
      accepted = true;
      break;
    }
  }
  EXPECT_TRUE(accepted);
  close(fd);
  ClientRun c = RunClient(s.port, {"--time=1", "--rate=1gbit"});
  ExpectIntact(c);
  StopServer(s);
}

// Clients that complete the handshake and then misbehave: no request, a malformed
// request, data before the request, an absurd request. Each ends only its own connection.
TEST(PerfE2E, ServerEndsMisbehavingConnectionsAndKeepsServing) {
  Server s = StartServer({"--max_test_duration=30s"});
  ASSERT_GT(s.port, 0);
  EndpointOptions eo;
  eo.security = endpoint::SecurityConfig::Insecure();
  absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
  ASSERT_TRUE(ep.ok());
  ConnectOptions co;
  co.config.rate = Bandwidth::Gbps(1);
  const std::vector<std::string> payloads = {
      "this is not a test request",
      std::string("LHPFCTL\x01", 8) + "{not json",
      std::string("LHPFCTL\x01", 8) + R"({"type":"request","test_id":"x"})",
      std::string("LHPFCTL\x01", 8) +
          R"({"type":"request","test_id":"x","stream":0,"streams":1,"reverse":false,)"
          R"("time_s":1e9,"bytes":0,"message_size":1048576,"workload":"bulk","load":0.5,)"
          R"("rate_bps":1e9,"interval_s":1,"version":"evil"})",
      std::string("LHPFCTL\x01", 8) + R"({"type":"result"})",
  };
  for (const std::string& p : payloads) {
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> h = (*ep)->Connect("127.0.0.1", s.port, co);
    ASSERT_TRUE(h.ok()) << h.status();
    auto owned = std::make_shared<std::string>(p);
    ASSERT_TRUE((*h)->Send(SendBuffer{reinterpret_cast<const uint8_t*>(owned->data()),
                                      owned->size(), owned},
                           1)
                    .ok());
    // The server aborts the connection with a reason.
    ASSERT_TRUE((*h)->WaitClosed(Duration::Seconds(20))) << p;
    EXPECT_FALSE((*h)->status().ok()) << p;
    absl::StatusOr<Json> rej = s.proc->WaitEvent("rejected", kStart);
    ASSERT_TRUE(rej.ok()) << rej.status() << " for " << p;
  }
  ClientRun c = RunClient(s.port, {"--time=1", "--rate=1gbit"});
  ExpectIntact(c);
  StopServer(s);
}

// A client killed mid-transfer: the server reports the vanished peer and serves the next.
TEST(PerfE2E, ClientVanishingMidTransferIsReportedAndTheServerGoesOn) {
  Server s = StartServer({"--idle_timeout=1s", "--keepalive=200ms"});
  ASSERT_GT(s.port, 0);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    std::vector<std::string> args = {"--client=127.0.0.1", absl::StrCat("--port=", s.port),
                                     "--time=60", "--rate=500mbit", "--insecure"};
    if (reverse) args.push_back("--reverse");
    absl::StatusOr<std::unique_ptr<EmuProcess>> client = EmuProcess::Start(LONGHAUL_PERF_BIN, args);
    ASSERT_TRUE(client.ok());
    absl::StatusOr<Json> acc = s.proc->WaitEvent("accepted", kStart);
    ASSERT_TRUE(acc.ok()) << acc.status();
    // Let data flow (the first interval line), then kill the client without any goodbye.
    const auto until = std::chrono::steady_clock::now() + milliseconds(10000);
    bool flowing = false;
    while (!flowing) {
      absl::StatusOr<std::string> line = (*client)->ReadLine(until);
      ASSERT_TRUE(line.ok()) << line.status();
      flowing = line->find(" sec ") != std::string::npos;
    }
    (*client)->Signal(SIGKILL);
    ASSERT_TRUE((*client)->Wait(milliseconds(10000)).ok());
    absl::StatusOr<Json> t = s.proc->WaitEvent("test", milliseconds(30000));
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE((*t)["intact"].get<bool>());
    ASSERT_FALSE((*t)["errors"].empty()) << t->dump();
    EXPECT_NE((*t)["errors"][0].get<std::string>().find("peer unreachable"), std::string::npos)
        << t->dump();
  }
  ClientRun c = RunClient(s.port, {"--time=1", "--rate=1gbit"});
  ExpectIntact(c);
  StopServer(s);
}

// ---- through the emulator ----

using Emu = perf_testing::EmuRelay;

Emu StartEmu(const std::string& link, int forward_port) {
  return perf_testing::StartEmuRelay(LONGHAUL_EMU_BIN, link, forward_port);
}

class PerfThroughEmu : public ::testing::TestWithParam<std::string> {};

TEST_P(PerfThroughEmu, IntactTransferOverAnImpairedLink) {
  if (!EmuAvailable()) {
    GTEST_SKIP() << "longhaul-emu not built (" << LONGHAUL_EMU_BIN
                 << "): build the longhaul-emu target to run the emulated-link cases";
  }
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  const std::string link = GetParam();
  Emu e = StartEmu(link, s.port);
  ASSERT_GT(e.port, 0);
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse" : "forward");
    std::vector<std::string> args = {"--bytes=12MiB", "--rate=200mbit", "--mtu=9000",
                                     "--message_size=256KiB", "--initial_rtt=20ms"};
    if (reverse) args.push_back("--reverse");
    ClientRun c = RunClient(e.port, args);
    ExpectIntact(c);
    if (!c.json.is_object()) continue;
    const Json& lh = c.json["end"]["longhaul"];
    EXPECT_EQ(c.json["end"]["sum_received"]["bytes"].get<uint64_t>(), uint64_t{12} << 20);
    if (link.find("loss") != std::string::npos) {
      EXPECT_GT(lh["retransmission"]["packets_retransmitted"].get<uint64_t>(), 0u) << lh.dump();
    }
    if (link.find("corrupt") != std::string::npos) {
      // Corrupted datagrams were caught by the checksum (both directions see some).
      EXPECT_GT(lh["sender_stats"]["checksum_failures"].get<uint64_t>() +
                    lh["receiver_stats"]["checksum_failures"].get<uint64_t>(),
                0u)
          << lh.dump();
    }
  }
  e.proc->Signal(SIGTERM);
  EXPECT_TRUE(e.proc->Wait(milliseconds(20000)).ok());
  StopServer(s);
}

// ECN end to end: the sender marks its datagrams ECT(0) (IP_TOS control messages), the
// emulator CE-marks ECN-capable datagrams while its queue is above the threshold, and the
// receiver reads the marks (IP_RECVTOS) into its counters. Sending 10 % above the link
// rate keeps a queue. With --noecn nothing may be marked.
TEST(PerfE2E, EcnMarksTravelBothWaysThroughTheEmulator) {
  if (!EmuAvailable()) {
    GTEST_SKIP() << "longhaul-emu not built (" << LONGHAUL_EMU_BIN << ")";
  }
  Server s = StartServer();
  ASSERT_GT(s.port, 0);
  Emu e = StartEmu("rate=200mbit,rtt=10ms,ecn=20KB,queue=2MB", s.port);
  ASSERT_GT(e.port, 0);
  ClientRun marked = RunClient(e.port, {"--bytes=16MiB", "--rate=220mbit", "--mtu=9000",
                                        "--message_size=256KiB", "--initial_rtt=20ms"});
  ExpectIntact(marked);
  if (marked.json.is_object()) {
    EXPECT_GT(marked.json["end"]["longhaul"]["receiver_stats"]["ecn_ce_received"].get<uint64_t>(),
              0u);
  }
  ClientRun plain = RunClient(e.port, {"--bytes=16MiB", "--rate=220mbit", "--mtu=9000",
                                       "--message_size=256KiB", "--initial_rtt=20ms", "--noecn"});
  ExpectIntact(plain);
  if (plain.json.is_object()) {
    EXPECT_EQ(plain.json["end"]["longhaul"]["receiver_stats"]["ecn_ce_received"].get<uint64_t>(),
              0u);
  }
  e.proc->Signal(SIGTERM);
  EXPECT_TRUE(e.proc->Wait(milliseconds(20000)).ok());
  StopServer(s);
}

INSTANTIATE_TEST_SUITE_P(
    Links, PerfThroughEmu,
    ::testing::Values("rate=200mbit,rtt=10ms,loss=0.01", "rate=200mbit,rtt=10ms,loss=0.02,burst=4",
                      "rate=200mbit,rtt=10ms,reorder=0.05,reorder_delay=2ms",
                      "rate=200mbit,rtt=10ms,dup=0.05", "rate=200mbit,rtt=10ms,corrupt=0.02",
                      "rate=200mbit,rtt=10ms,loss=0.01,reorder=0.02,dup=0.02,corrupt=0.01"));

}  // namespace
}  // namespace longhaul
