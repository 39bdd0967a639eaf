// longhaul-perf --verify=on|off end to end: server and client processes on 127.0.0.1
// (kernel-chosen port, plaintext). With --verify=off the client's JSON says
// "verified": false under end.longhaul.integrity and counts received_bytes (no verified
// bytes, no "intact"); the server, told by the request, reports the test unverified,
// also when it is the sender (--reverse) and for the messages workload (whose completion
// times still come from the header). With --verify=on (the default) the JSON says
// "verified": true next to the verified bytes. A bad value is a usage error (exit 2).
// Every wait is bounded; processes are killed and reaped by their handles' destructors.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/emu/emu_process.h"
#include "tests/e2e/perf/perf_process.h"

namespace longhaul {
namespace {

using Json = nlohmann::json;
using perf_testing::PerfRun;
using perf_testing::PerfServer;

constexpr std::chrono::milliseconds kEventTimeout(10000);

PerfRun RunClient(int port, std::vector<std::string> extra) {
  extra.insert(extra.begin(), "--insecure");
  return perf_testing::RunPerfClient(LONGHAUL_PERF_BIN, port, extra);
}

// The run succeeded and delivered `bytes` (every byte the sender submitted).
void ExpectComplete(const PerfRun& c, uint64_t bytes) {
  ASSERT_EQ(c.status, 0) << c.out << "\nstderr: " << c.err;
  ASSERT_TRUE(c.json.is_object()) << c.out;
  const Json& end = c.json["end"];
  EXPECT_EQ(end["sum_received"]["bytes"].get<uint64_t>(), bytes) << end.dump();
  EXPECT_EQ(end["sum_sent"]["bytes"].get<uint64_t>(), bytes) << end.dump();
}

// `args` and one more.
std::vector<std::string> With(std::vector<std::string> args, const std::string& more) {
  args.push_back(more);
  return args;
}

// The server's "test" event for the next finished test.
Json ServerTestEvent(PerfServer& s) {
  absl::StatusOr<Json> t = s.proc->WaitEvent("test", kEventTimeout);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Json();
}

TEST(PerfVerifyE2E, OffReportsReceivedBytesAndOnVerifiedBytes) {
  PerfServer s = perf_testing::StartPerfServer(LONGHAUL_PERF_BIN, {"--insecure"});
  ASSERT_GT(s.port, 0);
  constexpr uint64_t kBytes = uint64_t{16} << 20;
  for (const bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "reverse (the server sends)" : "forward (the server receives)");
    std::vector<std::string> common = {"--bytes=16MiB", "--rate=2gbit", "--message_size=256KiB"};
    if (reverse) common.push_back("--reverse");

    PerfRun off = RunClient(s.port, With(common, "--verify=off"));
    ExpectComplete(off, kBytes);
    const Json& off_int = off.json["end"]["longhaul"]["integrity"];
    EXPECT_EQ(off_int["verified"], false) << off_int.dump();
    EXPECT_EQ(off_int["received_bytes"].get<uint64_t>(), kBytes) << off_int.dump();
    EXPECT_EQ(off_int["complete"], true) << off_int.dump();
    EXPECT_FALSE(off_int.contains("verified_bytes")) << off_int.dump();
    EXPECT_FALSE(off_int.contains("intact")) << off_int.dump();
    EXPECT_EQ(off.json["start"]["test_start"]["verify"], false);
    const Json off_event = ServerTestEvent(s);
    EXPECT_EQ(off_event["verified"], false) << off_event.dump();
    EXPECT_EQ(off_event["bytes"].get<uint64_t>(), kBytes) << off_event.dump();

    PerfRun on = RunClient(s.port, With(common, "--verify=on"));
    ExpectComplete(on, kBytes);
    const Json& on_int = on.json["end"]["longhaul"]["integrity"];
    EXPECT_EQ(on_int["verified"], true) << on_int.dump();
    EXPECT_EQ(on_int["verified_bytes"].get<uint64_t>(), kBytes) << on_int.dump();
    EXPECT_EQ(on_int["corrupt_messages"].get<uint64_t>(), 0u) << on_int.dump();
    EXPECT_EQ(on_int["intact"], true) << on_int.dump();
    EXPECT_FALSE(on_int.contains("received_bytes")) << on_int.dump();
    const Json on_event = ServerTestEvent(s);
    EXPECT_EQ(on_event["verified"], true) << on_event.dump();
    EXPECT_EQ(on_event["intact"], true) << on_event.dump();
  }
  // The default is on.
  PerfRun def = RunClient(s.port, {"--bytes=4MiB", "--rate=2gbit"});
  ExpectComplete(def, uint64_t{4} << 20);
  EXPECT_EQ(def.json["end"]["longhaul"]["integrity"]["verified"], true);
  ServerTestEvent(s);
  perf_testing::StopPerfServer(s);
}

// The messages workload without the pattern: the header still carries the send time, so
// completion times are measured.
TEST(PerfVerifyE2E, OffMessagesWorkloadStillMeasuresCompletionTimes) {
  PerfServer s = perf_testing::StartPerfServer(LONGHAUL_PERF_BIN, {"--insecure"});
  ASSERT_GT(s.port, 0);
  PerfRun m = RunClient(s.port, {"--time=1", "--rate=1gbit", "--workload=messages",
                                 "--message_size=64KiB", "--load=0.3", "--verify=off"});
  ASSERT_EQ(m.status, 0) << m.out << "\nstderr: " << m.err;
  const Json& end = m.json["end"];
  EXPECT_EQ(end["longhaul"]["integrity"]["verified"], false);
  EXPECT_GT(end["messages"].get<uint64_t>(), 100u) << end.dump();
  EXPECT_GT(end["mct_p50_s"].get<double>(), 0);
  EXPECT_EQ(end["sum_received"]["bytes"], end["sum_sent"]["bytes"]);
  ServerTestEvent(s);
  perf_testing::StopPerfServer(s);
}

TEST(PerfVerifyE2E, BadValueIsAUsageError) {
  for (const char* role : {"--client=127.0.0.1", "--server"}) {
    absl::StatusOr<emu::testing::RunResult> r = emu::testing::RunToCompletion(
        LONGHAUL_PERF_BIN, {role, "--port=5999", "--insecure", "--verify=maybe"},
        std::chrono::milliseconds(30000));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 2) << role;
    EXPECT_NE(r->stderr_text.find("--verify: unknown 'maybe' (on, off)"), std::string::npos)
        << r->stderr_text;
  }
}

}  // namespace
}  // namespace longhaul
