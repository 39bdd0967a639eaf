// StreamProtocol (tools/bridge/stream_protocol.h) driven with frames and a
// virtual clock: one rule of docs/bridge.md section 4 per test, from both a
// server's and a client's side. No sockets, no threads.
#include "tools/bridge/stream_protocol.h"

#include <cstring>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tools/bridge/bridge_budget.h"
#include "tools/bridge/bridge_frames.h"

namespace longhaul::bridge {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

Event Message(const std::string& bytes) {
  Event e;
  e.type = Event::Type::kReceiveComplete;
  e.owned = OwnedBuffer(bytes.size());
  std::memcpy(e.owned.data(), bytes.data(), bytes.size());
  e.owned.set_size(bytes.size());
  e.data = e.owned.data();
  e.size = bytes.size();
  return e;
}

std::string Data(uint64_t stream, uint64_t seq, const std::string& payload) {
  std::string f(kFrameHeaderSize, '\0');
  WriteFrameHeader(FrameType::kData, stream, seq, reinterpret_cast<uint8_t*>(f.data()));
  return f + payload;
}

struct Sent {
  std::string bytes;
  bool ordered = false;
  // Decoded on each use: the body is a view of `bytes`, which this copy owns.
  Frame frame() const {
    return *DecodeFrame({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  }
};

// One StreamProtocol with its budget, metrics and a virtual clock.
struct Harness {
  explicit Harness(bool client, uint64_t budget_bytes = 64 * kMiB, uint64_t targets = 100,
                   std::shared_ptr<Budget> shared = nullptr)
      : budget(shared ? shared : std::make_shared<Budget>(budget_bytes, targets)) {
    options.is_client = client;
    options.stream_window = 4 * kMiB;
    options.memory = 64 * kMiB;
    options.has_forward = [](const std::string& name) { return name == "web"; };
    p = std::make_unique<StreamProtocol>(options, budget, &metrics);
  }
  // A new session of the same key (the old one's charges go back).
  void Restart() {
    p.reset();
    p = std::make_unique<StreamProtocol>(options, budget, &metrics);
  }

  void In(const std::string& frame) { p->OnMessage(now, Message(frame)); }
  void Open(uint64_t id, uint64_t window = kMiB) {
    In(EncodeFrame(FrameType::kOpen, id, window, "web"));
  }

  // Frames sent since the last call (their charges acknowledged unless
  // `keep_unacked`).
  std::vector<Sent> Out(bool keep_unacked = false) {
    std::vector<Sent> v;
    OutFrame f;
    while (p->PollSend(&f)) {
      Sent s;
      s.bytes = f.bytes;
      s.ordered = f.ordered;
      if (!keep_unacked) p->OnSendComplete(StreamProtocol::kControlTag, s.bytes.size());
      v.push_back(std::move(s));
    }
    return v;
  }
  std::vector<StreamEvent> Events() {
    std::vector<StreamEvent> v;
    StreamEvent e;
    while (p->PollEvent(&e)) v.push_back(e);
    return v;
  }
  // Writes every queued chunk of `stream` to "TCP"; returns the bytes written.
  std::string WriteAll(uint64_t stream) {
    std::string out;
    while (Chunk* c = p->NextChunk(stream)) {
      if (!c->fin) out.append(reinterpret_cast<const char*>(c->data), c->size);
      p->OnChunkWritten(now, stream);
    }
    return out;
  }
  uint64_t Refused(const std::string& reason) const {
    auto it = metrics.refused.find(reason);
    return it == metrics.refused.end() ? 0 : it->second;
  }

  ProtocolOptions options;
  Metrics metrics;
  std::shared_ptr<Budget> budget;
  std::unique_ptr<StreamProtocol> p;
  Time now = Time::FromNanoseconds(1'000'000'000);
};

bool HasEvent(const std::vector<StreamEvent>& v, StreamEvent::Kind k, uint64_t stream) {
  for (const StreamEvent& e : v) {
    if (e.kind == k && e.stream == stream) return true;
  }
  return false;
}

std::optional<Sent> FindSent(const std::vector<Sent>& v, FrameType t, uint64_t stream) {
  for (const Sent& s : v) {
    if (s.frame().type == t && s.frame().stream == stream) return s;
  }
  return std::nullopt;
}

// ---- sequencing, FIN, RESET

TEST(StreamProtocolTest, FramesAreDeliveredInSequenceAndBothFinsEndTheStream) {
  Harness h(/*client=*/false);
  h.Open(1);
  auto ev = h.Events();
  ASSERT_TRUE(HasEvent(ev, StreamEvent::Kind::kConnectTarget, 1));
  std::optional<Sent> w = FindSent(h.Out(), FrameType::kWindow, 1);
  ASSERT_TRUE(w) << "the first WINDOW acknowledges the OPEN";
  EXPECT_GE(w->frame().value, kInitialWindow);
  h.p->OnConnected(1);
  h.In(Data(1, 3, "cc"));
  h.In(Data(1, 2, "bb"));
  EXPECT_EQ(h.WriteAll(1), "") << "nothing before sequence 1";
  EXPECT_EQ(h.p->debug(1).held_frames, 2u);
  h.In(Data(1, 1, "aa"));
  EXPECT_EQ(h.WriteAll(1), "aabbcc");
  h.In(EncodeFrame(FrameType::kFin, 1, 4));
  h.WriteAll(1);
  EXPECT_TRUE(h.p->has_stream(1)) << "our direction is still open";
  h.p->OnLocalEof(1);
  EXPECT_FALSE(h.p->has_stream(1));
  EXPECT_EQ(h.metrics.streams_completed, 1u);
  h.Out();
  EXPECT_EQ(h.p->charged(), 0u) << "an ended stream gives back every charge";
  EXPECT_EQ(h.budget->targets_used(), 0u);
}

TEST(StreamProtocolTest, RepeatedSequenceEmptyDataSecondFinAndWindowOverrunEndTheSession) {
  struct Case {
    std::vector<std::string> frames;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {{Data(1, 1, "a"), Data(1, 1, "a")}, "sequence number 1 repeated"},
      {{Data(1, 1, "")}, "empty DATA"},
      {{EncodeFrame(FrameType::kFin, 1, 2), EncodeFrame(FrameType::kFin, 1, 3)}, "second FIN"},
      {{Data(1, 1, std::string(kInitialWindow + 1, 'x'))}, "beyond its window"},
  };
  for (const Case& c : cases) {
    Harness h(/*client=*/false,
              /*budget=*/kInitialWindow + kStreamCharge + 64 * 1024);
    h.Open(1);
    h.Events();
    for (const std::string& f : c.frames) h.In(f);
    const auto ev = h.Events();
    ASSERT_FALSE(ev.empty()) << c.detail;
    EXPECT_EQ(ev.back().kind, StreamEvent::Kind::kSessionError) << c.detail;
    EXPECT_TRUE(absl::StrContains(ev.back().detail, c.detail)) << ev.back().detail;
    EXPECT_TRUE(h.p->failed());
    EXPECT_EQ(h.metrics.protocol_errors, 1u);
  }
}

TEST(StreamProtocolTest, PeerResetEndsTheStreamAndAResetBeforeOpenMakesTheOpenStale) {
  Harness h(/*client=*/false);
  h.Open(1);
  h.Events();
  h.In(EncodeFrame(FrameType::kReset, 1, static_cast<uint64_t>(ResetCode::kAborted), "rst"));
  auto ev = h.Events();
  ASSERT_TRUE(HasEvent(ev, StreamEvent::Kind::kEnded, 1));
  EXPECT_TRUE(ev.back().reset);
  EXPECT_EQ(ev.back().by, "peer");
  EXPECT_EQ((h.metrics.streams_reset[{"aborted", "peer"}]), 1u);
  // Stream 2's RESET overtook its OPEN: the OPEN is ignored, its DATA is late.
  h.In(EncodeFrame(FrameType::kReset, 2, static_cast<uint64_t>(ResetCode::kAborted), ""));
  h.Open(2);
  h.In(Data(2, 1, "x"));
  EXPECT_FALSE(h.p->has_stream(2));
  EXPECT_FALSE(h.p->failed());
  EXPECT_EQ(h.Refused("stale_id"), 1u);
  EXPECT_FALSE(HasEvent(h.Events(), StreamEvent::Kind::kConnectTarget, 2));
}

// ---- DATA for a stream never opened

TEST(StreamProtocolTest, DataForAStreamNeverOpenedIsRefusedAndNothingIsKept) {
  Harness h(/*client=*/false);
  h.In(Data(7, 2, "x"));
  EXPECT_EQ(h.p->charged(), 0u);
  EXPECT_EQ(h.p->open_streams(), 0u);
  EXPECT_TRUE(h.p->failed());
  EXPECT_EQ(h.Refused("not_opened"), 1u);
  const auto ev = h.Events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, StreamEvent::Kind::kSessionError);
  EXPECT_TRUE(absl::StrContains(ev[0].detail, "never opened")) << ev[0].detail;
  // Nothing more is taken from a failed session.
  h.Open(9);
  EXPECT_EQ(h.p->open_streams(), 0u);
}

TEST(StreamProtocolTest, ClientSendsOrderedUntilTheFirstWindow) {
  Harness h(/*client=*/true);
  const uint64_t id = h.p->OpenLocal(h.now, "web");
  ASSERT_EQ(id, 1u);
  const auto out = h.Out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].frame().type, FrameType::kOpen);
  EXPECT_EQ(h.p->SendRoom(id), kInitialWindow);
  EXPECT_TRUE(h.p->OnDataRead(id, 100).ordered) << "may overtake nothing before its OPEN";
  h.In(EncodeFrame(FrameType::kWindow, id,
                   kInitialWindow));  // no more room, but seen
  const SendSlot s = h.p->OnDataRead(id, 100);
  EXPECT_FALSE(s.ordered);
  EXPECT_EQ(s.seq, 2u);
  // A DATA from the server for an id the client never opened ends the session.
  h.In(Data(5, 1, "x"));
  EXPECT_TRUE(h.p->failed());
  EXPECT_EQ(h.Refused("not_opened"), 1u);
}

// ---- per-frame overhead and the memory budget

TEST(StreamProtocolTest, EveryHeldFrameIsChargedItsOverheadAndTheBudgetHolds) {
  // Budget: the stream, its initial window, and room for 100 frame overheads.
  const uint64_t budget = kStreamCharge + kInitialWindow + 100 * kFrameOverhead;
  Harness h(/*client=*/false, budget);
  h.Open(1);
  h.Events();
  h.Out();
  const uint64_t base = h.p->charged();
  EXPECT_GE(base, kStreamCharge + kInitialWindow);
  // One-byte frames out of order (sequence 1 never comes): each costs the
  // overhead.
  uint64_t seq = 2;
  for (; seq < 2 + 100 && h.p->has_stream(1); ++seq) {
    h.In(Data(1, seq, "x"));
    if (h.p->has_stream(1)) {
      EXPECT_EQ(h.p->charged(), base + (seq - 1) * kFrameOverhead);
    }
    EXPECT_LE(h.budget->memory_used(), budget);
  }
  h.In(Data(1, seq, "x"));
  EXPECT_FALSE(h.p->has_stream(1)) << "the frame that does not fit resets its stream";
  EXPECT_EQ(h.Refused("memory"), 1u);
  std::optional<Sent> rst = FindSent(h.Out(), FrameType::kReset, 1);
  ASSERT_TRUE(rst);
  EXPECT_EQ(rst->frame().value, static_cast<uint64_t>(ResetCode::kLimit));
  EXPECT_TRUE(absl::StrContains(rst->frame().text(), "memory budget")) << rst->frame().text();
  EXPECT_EQ(h.p->charged(), 0u);
  EXPECT_FALSE(h.p->failed()) << "a reset stream, not a failed session";
}

TEST(StreamProtocolTest, AStreamHoldsAtMostMaxHeldFrames) {
  Harness h(/*client=*/false, /*budget=*/1ull << 30);
  h.Open(1);
  h.Events();
  for (uint64_t seq = 2; seq < 2 + kMaxHeldFrames; ++seq) h.In(Data(1, seq, "x"));
  ASSERT_TRUE(h.p->has_stream(1));
  EXPECT_EQ(h.p->debug(1).held_frames, kMaxHeldFrames);
  h.In(Data(1, 2 + kMaxHeldFrames, "x"));
  EXPECT_FALSE(h.p->has_stream(1));
  EXPECT_EQ(h.Refused("frames"), 1u);
  h.Out();
  EXPECT_EQ(h.p->charged(), 0u);
}

TEST(StreamProtocolTest, OpensAreRefusedWhenTheBudgetCannotBackTheirWindow) {
  const uint64_t budget = 8 * kMiB;
  Harness h(/*client=*/false, budget, /*targets=*/1000);
  uint64_t opened = 0;
  for (uint64_t id = 1; id <= 100; ++id) {
    h.Open(id);
    h.Out();
    opened += h.p->has_stream(id);
    EXPECT_LE(h.budget->memory_used(), budget);
  }
  // Each open stream holds its charge and initial window at least.
  EXPECT_LE(opened, budget / (kStreamCharge + kInitialWindow));
  EXPECT_GT(opened, 0u);
  EXPECT_EQ(h.Refused("memory"), 100 - opened);
  EXPECT_EQ((h.metrics.streams_reset[{"limit", "local"}]), 100 - opened);
}

TEST(StreamProtocolTest, WindowsShrinkWithOpenStreamsAndAreNeverMoreThanTheBudget) {
  const uint64_t budget = 64 * kMiB;
  Harness h(/*client=*/false, budget, /*targets=*/1000);
  h.Open(1);
  std::optional<Sent> first = FindSent(h.Out(), FrameType::kWindow, 1);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->frame().value, kOpenWindow) << "alone, before any data: the opening window";
  uint64_t last_window = first->frame().value;
  for (uint64_t id = 2; id <= 60; ++id) {
    h.Open(id);
    std::optional<Sent> w = FindSent(h.Out(), FrameType::kWindow, id);
    if (!w) continue;
    EXPECT_LE(w->frame().value, last_window);
    last_window = w->frame().value;
  }
  EXPECT_LT(last_window, 4 * kMiB);
  uint64_t promised = 0;
  for (uint64_t id = 1; id <= 60; ++id) promised += h.p->debug(id).granted;
  EXPECT_LE(promised, budget) << "every granted byte is charged";
  EXPECT_LE(h.budget->memory_used(), budget);
}

// A stream whose data flows grows to the full stream window with its first write; one
// that carries nothing holds at most the opening window, so many idle return paths (an
// upload's hundred parallel streams) fit a budget that full windows would exhaust.
TEST(StreamProtocolTest, WindowsGrowWhenDataFlowsAndIdleStreamsHoldTheOpeningWindow) {
  Harness h(/*client=*/false, 64 * kMiB, /*targets=*/1000);
  h.Open(1);
  h.Out();
  EXPECT_EQ(h.p->debug(1).granted, kOpenWindow);
  h.Events();
  h.p->OnConnected(1);
  h.In(Data(1, 1, std::string(1000, 'x')));
  EXPECT_EQ(h.WriteAll(1).size(), 1000u);
  EXPECT_EQ(h.p->debug(1).granted, 1000 + 4 * kMiB) << "flowing: the full stream window";

  // A client opening 100 streams whose return path stays idle: every one is granted and
  // charged, within a budget that 100 full windows (400 MiB) would exceed many times.
  const uint64_t budget = 160 * kMiB;
  Harness c(/*client=*/true, budget);
  c.options.memory = budget;
  c.Restart();
  for (int i = 0; i < 100; ++i) EXPECT_NE(c.p->OpenLocal(c.now, "web"), 0u) << i;
  EXPECT_EQ(c.Refused("memory"), 0u);
  EXPECT_LE(c.budget->memory_used(), budget);
}

TEST(StreamProtocolTest, AWindowTheBudgetCannotBackIsGrantedLaterOnTheClock) {
  const uint64_t budget = 4 * kMiB;
  Harness h(/*client=*/false, budget);
  h.Open(1);
  const std::optional<Sent> first = FindSent(h.Out(), FrameType::kWindow, 1);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->frame().value, kOpenWindow)
      << "half the budget for one stream, at most the opening window before data flows";
  // Another session of the key holds all but what stream 2's OPEN needs.
  const uint64_t other = h.budget->memory_available() - (kStreamCharge + kInitialWindow + 20000);
  ASSERT_TRUE(h.budget->TryCharge(other));
  h.Open(2);
  ASSERT_TRUE(h.p->has_stream(2));
  std::optional<Sent> w = FindSent(h.Out(), FrameType::kWindow, 2);
  ASSERT_TRUE(w) << "the OPEN is acknowledged even without a larger window";
  EXPECT_EQ(w->frame().value, kInitialWindow);
  EXPECT_EQ(h.Refused("window_deferred"), 1u);
  const Time retry = h.p->NextTimeout();
  ASSERT_FALSE(retry.IsInfinite()) << "a retry is due";
  EXPECT_EQ(retry, h.now + kGrantRetry);
  // At the retry time with memory still short: nothing, and another retry.
  h.now = retry;
  h.p->OnTimeout(h.now);
  EXPECT_FALSE(FindSent(h.Out(), FrameType::kWindow, 2));
  EXPECT_EQ(h.p->NextTimeout(), h.now + kGrantRetry);
  // The other session lets go: the next retry grants the window.
  h.budget->Release(other);
  h.now = h.p->NextTimeout();
  h.p->OnTimeout(h.now);
  std::optional<Sent> w2 = FindSent(h.Out(), FrameType::kWindow, 2);
  ASSERT_TRUE(w2);
  EXPECT_EQ(w2->frame().value, kMiB) << "a quarter of the budget each for two streams";
  EXPECT_TRUE(h.p->NextTimeout().IsInfinite());
  EXPECT_LE(h.budget->memory_used(), budget);
}

// ---- the send side and a peer that does not read

TEST(StreamProtocolTest, SentFramesAreChargedUntilAcknowledged) {
  Harness h(/*client=*/false);
  h.Open(1, /*window=*/kMiB);
  h.Out();
  h.p->OnConnected(1);
  const uint64_t before = h.p->charged();
  EXPECT_EQ(h.p->SendRoom(1), kMiB);
  h.p->OnDataRead(1, 1000);
  EXPECT_EQ(h.p->charged(), before + kFrameHeaderSize + 1000 + kFrameOverhead);
  EXPECT_EQ(h.p->SendRoom(1), kMiB - 1000);
  h.p->OnSendComplete(StreamProtocol::kDataTag, kFrameHeaderSize + 1000);
  EXPECT_EQ(h.p->charged(), before);
}

TEST(StreamProtocolTest, APeerThatAcknowledgesNoControlFrameEndsTheSession) {
  Harness h(/*client=*/false, /*budget=*/1ull << 30, /*targets=*/1'000'000);
  // OPENs for an unknown forward, each answered with a RESET the peer never
  // takes.
  uint64_t id = 1;
  for (; id < 100000 && !h.p->failed(); ++id) {
    h.In(EncodeFrame(FrameType::kOpen, id, kMiB, "nope"));
    h.Out(/*keep_unacked=*/true);
  }
  ASSERT_TRUE(h.p->failed());
  EXPECT_EQ(h.Refused("peer_not_reading"), 1u);
  EXPECT_LE(h.p->charged(), kMaxControlInflight + 2048);
  EXPECT_TRUE(HasEvent(h.Events(), StreamEvent::Kind::kSessionError, 0));
  // Nothing more is sent on a session that ended.
  h.In(EncodeFrame(FrameType::kOpen, id, kMiB, "nope"));
  EXPECT_TRUE(h.Out().empty());
}

// ---- stream and target limits, shared by the sessions of a key

TEST(StreamProtocolTest, TargetConnectionsAreABudgetOfTheKeyAcrossSessions) {
  auto process = std::make_shared<Budget>(1ull << 30, 3);
  auto key = std::make_shared<Budget>(512 * kMiB, 2, process);
  Harness a(/*client=*/false, 0, 0, key), b(/*client=*/false, 0, 0, key);
  a.Open(1);
  b.Open(1);
  b.Open(2);
  EXPECT_TRUE(a.p->has_stream(1));
  EXPECT_TRUE(b.p->has_stream(1));
  EXPECT_FALSE(b.p->has_stream(2));
  EXPECT_EQ(b.Refused("targets"), 1u);
  std::optional<Sent> rst = FindSent(b.Out(), FrameType::kReset, 2);
  ASSERT_TRUE(rst);
  EXPECT_TRUE(absl::StrContains(rst->frame().text(), "target connections")) << rst->frame().text();
  EXPECT_EQ(process->targets_used(), 2u);
  // A stream's end gives its target connection back.
  a.In(EncodeFrame(FrameType::kReset, 1, static_cast<uint64_t>(ResetCode::kAborted), ""));
  b.Open(3);
  EXPECT_TRUE(b.p->has_stream(3));
  // Destroying a session gives back everything it held.
  b.p.reset();
  a.p.reset();
  EXPECT_EQ(key->targets_used(), 0u);
  EXPECT_EQ(process->targets_used(), 0u);
  EXPECT_EQ(process->memory_used(), 0u);
}

TEST(StreamProtocolTest, UnknownForwardDrainingAndStreamLimitAreResets) {
  Harness h(/*client=*/false);
  h.In(EncodeFrame(FrameType::kOpen, 1, kMiB, "nope"));
  std::optional<Sent> rst = FindSent(h.Out(), FrameType::kReset, 1);
  ASSERT_TRUE(rst);
  EXPECT_EQ(rst->frame().value, static_cast<uint64_t>(ResetCode::kUnknownForward));
  h.p->Drain();
  EXPECT_TRUE(FindSent(h.Out(), FrameType::kGoAway, 0));
  h.Open(2);
  rst = FindSent(h.Out(), FrameType::kReset, 2);
  ASSERT_TRUE(rst);
  EXPECT_EQ(rst->frame().value, static_cast<uint64_t>(ResetCode::kDraining));
  EXPECT_EQ(h.p->open_streams(), 0u);
}

// ---- what is remembered of ids

TEST(StreamProtocolTest, RememberedIdsAreBoundedForSparseIdsAndUnknownResets) {
  Harness h(/*client=*/false, /*budget=*/1ull << 30, /*targets=*/1'000'000);
  const uint64_t n = 3 * kMaxRememberedIds;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t id = 10 + i * 1000;  // sparse
    h.In(EncodeFrame(FrameType::kReset, id, static_cast<uint64_t>(ResetCode::kAborted), ""));
    EXPECT_LE(h.p->remembered_ids(), kMaxRememberedIds);
  }
  EXPECT_EQ(h.Refused("ids_forgotten"), n - kMaxRememberedIds);
  EXPECT_GT(h.p->id_floor(), 10u);
  // An OPEN below the floor is stale; one above every id opens.
  h.Open(11);
  EXPECT_FALSE(h.p->has_stream(11));
  EXPECT_EQ(h.Refused("stale_id"), 1u);
  h.Open(10 + n * 1000);
  EXPECT_TRUE(h.p->has_stream(10 + n * 1000));
  EXPECT_FALSE(h.p->failed());
}

TEST(StreamProtocolTest, ClosedStreamIdsOfAnHonestClientCollapseIntoTheFloor) {
  Harness h(/*client=*/false);
  for (uint64_t id = 1; id <= 2000; ++id) {
    h.Open(id);
    h.In(EncodeFrame(FrameType::kReset, id, static_cast<uint64_t>(ResetCode::kAborted), ""));
  }
  EXPECT_EQ(h.p->remembered_ids(), 0u);
  EXPECT_EQ(h.p->id_floor(), 2000u);
  EXPECT_EQ(h.Refused("ids_forgotten"), 0u);
  h.In(Data(5, 9, "late"));
  EXPECT_FALSE(h.p->failed()) << "a late frame of an ended stream is ignored";
}

// ---- the connection ends

TEST(StreamProtocolTest, ConnectionEndResetsUnfinishedStreamsAndKeepsFinishedOnes) {
  Harness h(/*client=*/true);
  const uint64_t a = h.p->OpenLocal(h.now, "web");
  const uint64_t b = h.p->OpenLocal(h.now, "web");
  h.Out();
  h.In(Data(a, 1, "tail"));
  h.In(EncodeFrame(FrameType::kFin, a, 2));
  h.p->OnLocalEof(a);
  h.Events();
  h.p->OnConnectionClosed(absl::OkStatus());
  const auto ev = h.Events();
  EXPECT_TRUE(HasEvent(ev, StreamEvent::Kind::kEnded, b));
  EXPECT_TRUE(h.p->has_stream(a)) << "finished both ways: its bytes are still written";
  EXPECT_EQ(h.WriteAll(a), "tail");
  EXPECT_FALSE(h.p->has_stream(a));
  EXPECT_EQ((h.metrics.streams_reset[{"session_lost", "local"}]), 1u);
}

// ---- a fuzz-style driver: random frames from a hostile peer

// Seeded random frames (every type, small stream ids and sparse ones, sequence numbers
// near the expected ones and not, payloads of 1 byte to 64 KiB), the TCP side writing now
// and then, the clock moving: the budget is never exceeded by more than the control
// frames one session may force, nothing is charged once the session is gone, and the
// ids remembered stay bounded.
TEST(StreamProtocolTest, RandomFramesNeverExceedTheBudget) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const uint64_t budget = 8 * kMiB;
    Harness h(/*client=*/false, budget, /*targets=*/8);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull;
    auto rnd = [&x](uint64_t n) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return n == 0 ? 0 : x % n;
    };
    int sessions = 1;
    uint64_t max_held = 0;
    std::map<uint64_t, uint64_t> next;  // per stream id: the next sequence number to send
    for (int i = 0; i < 20000; ++i) {
      if (h.p->failed()) {
        h.Restart();
        next.clear();
        ++sessions;
      }
      const uint64_t id = rnd(8) == 0 ? 1 + rnd(1ull << 40) : 1 + rnd(24);
      // Frames of streams never opened end the session: only now and then.
      if (!h.p->has_stream(id) && rnd(500) != 0) {
        h.Open(id, rnd(4) * kMiB);
        continue;
      }
      switch (rnd(10)) {
        case 0:
          if (!h.p->has_stream(id) || rnd(64) == 0) h.Open(id, rnd(4) * kMiB);
          break;
        case 1:
          h.In(EncodeFrame(FrameType::kReset, id, 1 + rnd(6), "r"));
          break;
        case 2:
          h.In(EncodeFrame(FrameType::kWindow, id, rnd(1ull << 30)));
          break;
        case 3:
          if (rnd(16) == 0) {
            uint64_t& n = next[id];
            n = std::max<uint64_t>(n, 1);
            h.In(EncodeFrame(FrameType::kFin, id, rnd(64) == 0 ? 1 + rnd(64) : n + rnd(3)));
            n = ~0ull / 2;  // nothing after a FIN (a wild frame now and then)
          }
          break;
        default: {
          // Mostly forward (holes left behind stay held), now and then anything.
          uint64_t& n = next[id];
          n = std::max<uint64_t>(n, 1);
          const uint64_t seq = rnd(64) == 0 ? 1 + rnd(1000) : n + rnd(3);
          n = std::max(n, seq + 1);
          h.In(Data(id, seq, std::string(rnd(64) == 0 ? 1 + rnd(64 * 1024) : 1, 'x')));
          max_held = std::max<uint64_t>(max_held, h.p->debug(id).held_frames);
        }
      }
      if (rnd(4) == 0) h.p->OnConnected(id);
      if (rnd(3) == 0) h.WriteAll(id);
      if (rnd(50) == 0) {
        h.now = h.now + Duration::Milliseconds(rnd(50));
        h.p->OnTimeout(h.now);
      }
      h.Out(/*keep_unacked=*/rnd(10) == 0);
      h.Events();
      ASSERT_LE(h.budget->memory_used(), budget + kMaxControlInflight + 2048) << "seed " << seed;
      ASSERT_LE(h.p->remembered_ids(), kMaxRememberedIds);
      ASSERT_LE(h.budget->targets_used(), 8u);
    }
    // The rules were reached, not skipped.
    EXPECT_GT(h.metrics.streams_opened, 10u) << "seed " << seed;
    EXPECT_LT(sessions, 1000) << "most frames reached a live session";
    EXPECT_GT(max_held, 8u) << "frames were held out of order";
    h.p.reset();
    EXPECT_EQ(h.budget->memory_used(), 0u) << "seed " << seed;
    EXPECT_EQ(h.budget->targets_used(), 0u) << "seed " << seed;
  }
}

// ---- ClientBudgets

TEST(ClientBudgetsTest, SessionsPerKeyAndOneBudgetPerKeyUnderTheProcess) {
  ClientLimits l;
  l.memory_per_key = 10 * kMiB;
  l.memory_total = 15 * kMiB;
  l.sessions_per_key = 2;
  ClientBudgets b(l);
  auto a1 = b.BeginSession("a");
  auto a2 = b.BeginSession("a");
  auto a3 = b.BeginSession("a");
  ASSERT_TRUE(a1.ok() && a2.ok());
  ASSERT_FALSE(a3.ok());
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(a3.status().message(), "--sessions_per_key=2"));
  EXPECT_EQ(a1->get(), a2->get()) << "one budget per key";
  auto c = b.BeginSession("c");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*a1)->TryCharge(10 * kMiB));
  EXPECT_FALSE((*a1)->TryCharge(1)) << "the key's limit";
  EXPECT_FALSE((*c)->TryCharge(6 * kMiB)) << "the process's limit";
  EXPECT_TRUE((*c)->TryCharge(5 * kMiB));
  EXPECT_EQ(b.process().memory_used(), 15 * kMiB);
  // A session that ended but still holds its budget (its last streams finishing) shares
  // it with the key's next session.
  b.EndSession("a");
  b.EndSession("a");
  EXPECT_EQ(b.sessions("a"), 0u);
  auto a4 = b.BeginSession("a");
  ASSERT_TRUE(a4.ok()) << "a key's sessions may come back";
  EXPECT_EQ(a4->get(), a1->get());
  EXPECT_FALSE((*a4)->TryCharge(1)) << "still the same key's limit";
  (*a1)->Release(10 * kMiB);
  b.EndSession("a");
  a1->reset();
  a2->reset();
  a4->reset();
  b.EndSession("c");
  c->reset();
  ASSERT_TRUE(b.BeginSession("d").ok());  // and sweeps
  EXPECT_EQ(b.keys(), 1u) << "keys without sessions or budgets are forgotten";
  EXPECT_EQ(b.process().memory_used(), 0u) << "what c held went back with its budget";
}

}  // namespace
}  // namespace longhaul::bridge
