// longhaul-bridge's stream protocol against a real server bridge: the test process is
// the client bridge, speaking frames (tools/bridge/bridge_frames.h) over its own
// longhaul connection, so it can send what a correct client never would. The server
// answers OPEN/DATA/FIN with WINDOW, DATA from sequence 1 and FIN; an unknown forward
// with a RESET naming it; a RESET that overtook its OPEN leaves the target alone; late
// frames of an ended stream are ignored; a malformed frame, a repeated sequence number
// or data beyond the granted window end the connection as a protocol error (counted);
// SIGTERM sends GOAWAY and refuses new streams. Every wait is bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/bridge/bridge_harness.h"
#include "tools/bridge/bridge_frames.h"
#include "transport/api/endpoint.h"

namespace longhaul::bridge_testing {
namespace {

using bridge::DecodeFrame;
using bridge::EncodeFrame;
using bridge::FrameType;
using bridge::ResetCode;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

struct Received {
  FrameType type = FrameType::kData;
  uint64_t stream = 0;
  uint64_t value = 0;
  std::string body;
};

// A client bridge played by the test: one longhaul connection with the bridge's
// application data; frames sent ordered (see Send).
class FakeClient {
 public:
  bool Connect(int port) {
    EndpointOptions eo;
    eo.security = endpoint::SecurityConfig::Insecure();
    absl::StatusOr<std::unique_ptr<Endpoint>> ep = Endpoint::Create(eo);
    EXPECT_TRUE(ep.ok()) << ep.status();
    if (!ep.ok()) return false;
    ep_ = *std::move(ep);
    ConnectOptions co;
    co.app_data = "longhaul-bridge/1";
    co.timeout = Duration::Seconds(5);
    absl::StatusOr<std::shared_ptr<ConnectionHandle>> c =
        ep_->Connect("127.0.0.1", static_cast<uint16_t>(port), co);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return false;
    conn_ = *std::move(c);
    return true;
  }
  ~FakeClient() {
    if (ep_) ep_->Close();
  }

  // Queues one frame; returns its message id. Ordered, as a client bridge sends a new
  // stream's frames (they never overtake its OPEN); the tests choose the sequence
  // numbers, so frames still arrive "out of order" where a test wants them to.
  uint64_t Send(std::string frame) {
    auto owner = std::make_shared<std::string>(std::move(frame));
    SendBuffer b{reinterpret_cast<const uint8_t*>(owner->data()), owner->size(), owner,
                 /*unordered=*/false};
    absl::StatusOr<uint64_t> id = conn_->Send(std::move(b), 0);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : ~0ULL;
  }
  uint64_t SendData(uint64_t stream, uint64_t seq, uint64_t offset, size_t n) {
    std::string f(bridge::kFrameHeaderSize + n, '\0');
    bridge::WriteFrameHeader(FrameType::kData, stream, seq, reinterpret_cast<uint8_t*>(f.data()));
    FillPattern(offset, reinterpret_cast<uint8_t*>(f.data()) + bridge::kFrameHeaderSize, n);
    return Send(std::move(f));
  }

  // The next frame from the server (send completions are noted on the way).
  std::optional<Received> Next(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    // Each pass takes one event or ends at the deadline.
    while (Clock::now() < deadline) {
      Event e;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (!conn_->Wait(&e, Duration::Milliseconds(std::max<int64_t>(1, left.count())))) continue;
      if (e.type == Event::Type::kSendComplete) {
        acked_.push_back(e.message_id);
        continue;
      }
      if (e.type == Event::Type::kClosed) {
        closed_ = e.status;
        return std::nullopt;
      }
      absl::StatusOr<bridge::Frame> f =
          DecodeFrame(std::span<const uint8_t>(e.data, static_cast<size_t>(e.size)));
      EXPECT_TRUE(f.ok()) << "the server sent a malformed frame: " << f.status();
      if (!f.ok()) return std::nullopt;
      Received r{f->type, f->stream, f->value, std::string(f->text())};
      conn_->ReturnBuffer(std::move(e.owned));
      return r;
    }
    return std::nullopt;
  }
  // Frames until one of `type` for `stream` (the others in *skipped).
  std::optional<Received> NextOf(FrameType type, uint64_t stream, milliseconds timeout,
                                 std::vector<Received>* skipped = nullptr) {
    const auto deadline = Clock::now() + timeout;
    for (int i = 0; i < 100000 && Clock::now() < deadline; ++i) {
      std::optional<Received> r =
          Next(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
      if (!r) return std::nullopt;
      if (r->type == type && r->stream == stream) return r;
      if (skipped) skipped->push_back(*r);
    }
    return std::nullopt;
  }
  // Waits for the send completion of message `id`.
  bool WaitAcked(uint64_t id, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (int i = 0; i < 100000 && Clock::now() < deadline; ++i) {
      if (std::find(acked_.begin(), acked_.end(), id) != acked_.end()) return true;
      std::optional<Received> r = Next(milliseconds(50));
      if (r) frames_.push_back(*r);
      if (closed_) return false;
    }
    return false;
  }
  // Waits for the connection's end; its status.
  std::optional<absl::Status> WaitClosed(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (int i = 0; i < 100000 && !closed_ && Clock::now() < deadline; ++i) {
      Next(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    }
    return closed_;
  }

  std::vector<Received> frames_;  // frames read while waiting for something else

 private:
  std::unique_ptr<Endpoint> ep_;
  std::shared_ptr<ConnectionHandle> conn_;
  std::vector<uint64_t> acked_;
  std::optional<absl::Status> closed_;
};

std::string Open(uint64_t stream, uint64_t window, const std::string& name = "default") {
  return EncodeFrame(FrameType::kOpen, stream, window, name);
}

// A server bridge in front of `target_port`, and the fake client connected to it.
struct FakeSetup {
  std::unique_ptr<Bridge> server;
  FakeClient client;
  bool Start(int target_port, std::vector<std::string> flags = {}) {
    flags.push_back(absl::StrCat("--target=127.0.0.1:", target_port));
    server = StartServer(flags, /*metrics=*/true);
    return server && client.Connect(server->udp_port);
  }
};

TEST(BridgeProtocolE2E, StreamRoundTripFollowsTheProtocol) {
  Target target(TargetMode::kReplyAfterEof);
  FakeSetup s;
  ASSERT_TRUE(s.Start(target.port()));
  s.client.Send(Open(1, 8 * kMiB));
  s.client.SendData(1, 1, 0, 1000);
  s.client.SendData(1, 2, 1000, 2000);
  s.client.Send(EncodeFrame(FrameType::kFin, 1, 3));
  // The server's side of stream 1: its grant, then the reply as DATA 1, 2, ... and FIN.
  std::vector<Received> frames;
  std::optional<Received> fin = s.client.NextOf(FrameType::kFin, 1, milliseconds(10000), &frames);
  ASSERT_TRUE(fin) << "no FIN from the server";
  bool window = false;
  uint64_t next_seq = 1, bytes = 0;
  for (const Received& r : frames) {
    if (r.type == FrameType::kWindow) {
      EXPECT_EQ(r.stream, 1u);
      EXPECT_GE(r.value, 3000u) << "the grant covers what was sent";
      window = true;
      continue;
    }
    ASSERT_EQ(r.type, FrameType::kData);
    EXPECT_EQ(r.stream, 1u);
    EXPECT_EQ(r.value, next_seq) << "DATA sequence numbers count from 1 (frames of one "
                                    "stream from one sender arrive here in order on loopback)";
    next_seq = r.value + 1;
    EXPECT_EQ(CheckPattern(bytes, reinterpret_cast<const uint8_t*>(r.body.data()), r.body.size()),
              r.body.size());
    bytes += r.body.size();
  }
  EXPECT_TRUE(window) << "no WINDOW after OPEN";
  EXPECT_EQ(bytes, 3000u);
  EXPECT_EQ(fin->value, next_seq) << "FIN comes last in its stream's sequence";
  std::vector<TargetConn> seen = target.WaitDone(1, milliseconds(5000));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].end, End::kEof);
  EXPECT_EQ(seen[0].bytes_in, 3000u);
  ExpectMetric(*s.server, "longhaul_bridge_streams_completed_total", 1);
  // A late frame of the ended stream is ignored, not an error; stream 2 then works.
  s.client.SendData(1, 9, 0, 10);
  s.client.Send(Open(2, 8 * kMiB));
  s.client.Send(EncodeFrame(FrameType::kFin, 2, 1));
  ASSERT_TRUE(s.client.NextOf(FrameType::kFin, 2, milliseconds(10000)));
  ExpectMetric(*s.server, "longhaul_bridge_streams_completed_total", 2);
  ExpectMetric(*s.server, "longhaul_bridge_protocol_errors_total", 0);
  StopBridge(*s.server);
}

TEST(BridgeProtocolE2E, UnknownForwardIsResetWithItsName) {
  Target target(TargetMode::kSink);
  FakeSetup s;
  ASSERT_TRUE(s.Start(target.port()));
  s.client.Send(Open(1, kMiB, "nosuch"));
  s.client.SendData(1, 1, 0, 100);
  std::optional<Received> reset = s.client.NextOf(FrameType::kReset, 1, milliseconds(10000));
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->value, static_cast<uint64_t>(ResetCode::kUnknownForward));
  EXPECT_TRUE(absl::StrContains(reset->body, "'nosuch'")) << reset->body;
  ExpectMetric(*s.server, ResetSeries("unknown_forward", "local"), 1);
  EXPECT_EQ(target.accepted(), 0u);
  StopBridge(*s.server);
}

TEST(BridgeProtocolE2E, ResetThatOvertookItsOpenConnectsNothing) {
  Target target(TargetMode::kEcho);
  FakeSetup s;
  ASSERT_TRUE(s.Start(target.port()));
  // The RESET is acknowledged (so the server bridge has it) before the OPEN is sent.
  const uint64_t id = s.client.Send(
      EncodeFrame(FrameType::kReset, 1, static_cast<uint64_t>(ResetCode::kAborted), "gone"));
  ASSERT_TRUE(s.client.WaitAcked(id, milliseconds(10000)));
  s.client.Send(Open(1, kMiB));
  s.client.SendData(1, 1, 0, 100);
  // Stream 2 completes: everything sent before it was handled by then.
  s.client.Send(Open(2, kMiB));
  s.client.Send(EncodeFrame(FrameType::kFin, 2, 1));
  ASSERT_TRUE(s.client.NextOf(FrameType::kFin, 2, milliseconds(10000)));
  EXPECT_EQ(target.accepted(), 1u) << "the server connected to the target for a reset stream";
  ExpectMetric(*s.server, "longhaul_bridge_streams_opened_total", 1);
  ExpectMetric(*s.server, "longhaul_bridge_protocol_errors_total", 0);
  StopBridge(*s.server);
}

// Each case ends the connection as a protocol error naming the problem.
struct Violation {
  const char* name;
  std::vector<std::string> server_flags;
  std::function<void(FakeClient&)> send;
  const char* detail;  // in the close reason
};

TEST(BridgeProtocolE2E, ViolationsEndTheConnection) {
  const std::vector<Violation> cases = {
      {"malformed frame",
       {},
       [](FakeClient& c) { c.Send(std::string("\x02\x00\x01", 3)); },
       "malformed bridge DATA frame: truncated header"},
      {"unknown type",
       {},
       [](FakeClient& c) { c.Send(EncodeFrame(static_cast<FrameType>(9), 1, 1)); },
       "unknown type 9"},
      {"repeated sequence number",
       {},
       [](FakeClient& c) {
         c.Send(Open(1, kMiB));
         c.SendData(1, 1, 0, 10);
         c.SendData(1, 1, 0, 10);
       },
       "stream 1: sequence number 1 repeated"},
      {"empty DATA frame",
       {},
       [](FakeClient& c) {
         c.Send(Open(1, kMiB));
         c.SendData(1, 1, 0, 0);
       },
       "stream 1: empty DATA frame"},
      {"second FIN",
       {},
       [](FakeClient& c) {
         c.Send(Open(1, kMiB));
         c.Send(EncodeFrame(FrameType::kFin, 1, 3));  // out of order: waits for 1 and 2
         c.Send(EncodeFrame(FrameType::kFin, 1, 2));
       },
       "stream 1: second FIN"},
      {"data beyond the window",
       {"--stream_window=1MiB", "--memory=1MiB"},
       [](FakeClient& c) {
         c.Send(Open(1, kMiB));
         for (uint64_t i = 0; i < 16; ++i) c.SendData(1, 1 + i, i * 64 * kKiB, 64 * kKiB);
         c.SendData(1, 17, kMiB, 1);  // one byte over
       },
       "stream 1: peer sent beyond its window"},
      {"DATA for a stream never opened",
       {},
       [](FakeClient& c) { c.SendData(5, 1, 0, 10); },
       "stream 5: DATA for a stream that was never opened"},
  };
  for (const Violation& v : cases) {
    SCOPED_TRACE(v.name);
    SilentListener silent;
    FakeSetup s;
    ASSERT_TRUE(s.Start(silent.port, v.server_flags));
    v.send(s.client);
    std::optional<absl::Status> closed = s.client.WaitClosed(milliseconds(10000));
    ASSERT_TRUE(closed) << "the server kept the connection";
    EXPECT_FALSE(closed->ok());
    EXPECT_TRUE(absl::StrContains(closed->message(), v.detail)) << *closed;
    ExpectMetric(*s.server, "longhaul_bridge_protocol_errors_total", 1);
    ExpectMetric(*s.server, "longhaul_bridge_sessions_open", 0);
    StopBridge(*s.server);
  }
}

TEST(BridgeProtocolE2E, FullWindowIsNotAViolation) {
  SilentListener silent;
  FakeSetup s;
  ASSERT_TRUE(s.Start(silent.port, {"--stream_window=1MiB", "--memory=1MiB"}));
  s.client.Send(Open(1, kMiB));
  uint64_t last = 0;
  for (uint64_t i = 0; i < 16; ++i) last = s.client.SendData(1, 1 + i, i * 64 * kKiB, 64 * kKiB);
  ASSERT_TRUE(s.client.WaitAcked(last, milliseconds(10000)));
  // Still open: a new stream is answered (its WINDOW).
  s.client.Send(Open(2, kMiB));
  EXPECT_TRUE(s.client.NextOf(FrameType::kWindow, 2, milliseconds(10000)));
  ExpectMetric(*s.server, "longhaul_bridge_protocol_errors_total", 0);
}

// SIGTERM with a stream open: GOAWAY, new streams refused (RESET draining), the open
// one still served; the server exits 0 once it has ended.
TEST(BridgeProtocolE2E, SigtermSendsGoAwayAndRefusesNewStreams) {
  Target target(TargetMode::kEcho);
  FakeSetup s;
  ASSERT_TRUE(s.Start(target.port()));
  s.client.Send(Open(1, kMiB));
  s.client.SendData(1, 1, 0, 10);
  ASSERT_TRUE(s.client.NextOf(FrameType::kData, 1, milliseconds(10000)));  // echoed: up
  s.server->Signal(SIGTERM);
  std::optional<Received> goaway = s.client.NextOf(FrameType::kGoAway, 0, milliseconds(10000));
  ASSERT_TRUE(goaway) << "no GOAWAY while a stream is open";
  EXPECT_EQ(goaway->value, 0u);
  EXPECT_FALSE(goaway->body.empty());
  s.client.Send(Open(2, kMiB));
  std::optional<Received> reset = s.client.NextOf(FrameType::kReset, 2, milliseconds(10000));
  ASSERT_TRUE(reset);
  EXPECT_EQ(reset->value, static_cast<uint64_t>(ResetCode::kDraining));
  // Stream 1 is still served.
  s.client.SendData(1, 2, 10, 10);
  std::optional<Received> more = s.client.NextOf(FrameType::kData, 1, milliseconds(10000));
  ASSERT_TRUE(more);
  EXPECT_EQ(more->body.size(), 10u);
  s.client.Send(EncodeFrame(FrameType::kFin, 1, 3));
  EXPECT_TRUE(s.client.WaitClosed(milliseconds(10000))) << "the server kept the connection";
  absl::StatusOr<int> st = s.server->Wait(milliseconds(10000));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(*st, 0);
  EXPECT_EQ(target.accepted(), 1u);
}

// SIGTERM with no stream: the connection closes cleanly at once, the server exits 0.
TEST(BridgeProtocolE2E, SigtermWithoutStreamsClosesCleanly) {
  Target target(TargetMode::kSink);
  FakeSetup s;
  ASSERT_TRUE(s.Start(target.port()));
  // The server has taken the connection (not a handshake it has yet to confirm).
  ASSERT_TRUE(s.server->WaitLine("client bridge", kStartTimeout));
  s.server->Signal(SIGTERM);
  std::optional<absl::Status> closed = s.client.WaitClosed(milliseconds(10000));
  ASSERT_TRUE(closed);
  EXPECT_TRUE(closed->ok()) << *closed;
  absl::StatusOr<int> st = s.server->Wait(milliseconds(10000));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(*st, 0);
}

}  // namespace
}  // namespace longhaul::bridge_testing
