// DriverRuntime without sockets or threads: two runtimes, each with its sans-IO
// endpoint, driven by a fake driver loop in virtual time on the test's thread (the loop
// udp_driver.cc documents: apply wakes, feed datagrams, process endpoint events, deliver).
// Connect and accept (queue and callback), the listen policy, data through the handles,
// close, stats publication, shutdown.
#include "transport/datapath/driver_runtime.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_config.h"

namespace longhaul::datapath {
namespace {

using ::testing::HasSubstr;

#define ASSERT_OK(expr)             \
  do {                              \
    const absl::Status s_ = (expr); \
    ASSERT_TRUE(s_.ok()) << s_;     \
  } while (0)

constexpr endpoint::LocalId kServerLocal = 1;
constexpr endpoint::LocalId kClientLocal = 7;

endpoint::PeerAddress Address(uint8_t node) {
  const uint8_t b[2] = {0xAD, node};
  return endpoint::PeerAddress(std::span<const uint8_t>(b, sizeof(b)));
}

// A driver's side of one runtime: its hook calls, recorded.
struct FakeDriver {
  int wakes = 0;
  std::vector<endpoint::LocalId> closed_locals;
  DriverRuntime::Hooks Hooks() {
    DriverRuntime::Hooks h;
    h.wake = [this] { ++wakes; };
    h.close_local = [this](endpoint::LocalId l) { closed_locals.push_back(l); };
    h.local_address = [](endpoint::LocalId l) { return "local-" + std::to_string(l); };
    return h;
  }
};

// A server runtime (node 1) and a client runtime (node 2) joined by a lossless
// zero-delay path; virtual time jumps to the next deadline.
class RuntimePair {
 public:
  RuntimePair()
      : server_(::longhaul::testing::InsecureEndpointConfig(1), server_driver_.Hooks()),
        client_(::longhaul::testing::InsecureEndpointConfig(2), client_driver_.Hooks()) {
    server_.SetDriverThread(std::this_thread::get_id());
    client_.SetDriverThread(std::this_thread::get_id());
  }

  DriverRuntime& server() { return server_; }
  DriverRuntime& client() { return client_; }
  FakeDriver& server_driver() { return server_driver_; }
  FakeDriver& client_driver() { return client_driver_; }
  Time now() const { return now_; }

  std::shared_ptr<ConnectWait> Connect(ConnectOptions options) {
    auto wait = std::make_shared<ConnectWait>();
    client_.StartConnect(now_, Address(1), {kClientLocal}, std::move(options), wait);
    return wait;
  }

  // One pass of both drivers' loops at now().
  void Step() {
    Drive(server_, client_, kClientLocal, Address(1));
    Drive(client_, server_, kServerLocal, Address(2));
  }

  // Steps until `done()` or `limit` of virtual time passed; false on the limit.
  bool RunUntil(const std::function<bool()>& done, Duration limit = Duration::Seconds(5)) {
    const Time end = now_ + limit;
    for (int i = 0; i < 1'000'000; ++i) {
      Step();
      if (done()) return true;
      Time next =
          std::min(server_.endpoint().NextTimeout(now_), client_.endpoint().NextTimeout(now_));
      next = std::min(next, now_ + DriverRuntime::kStatsPublishPeriod);
      if (server_.HasLocalWakes() || client_.HasLocalWakes()) next = now_;
      now_ = std::max(next, now_ + Duration::Microseconds(1));
      if (now_ > end) return false;
    }
    return false;
  }

 private:
  // `rt` applies what its handles queued, sends everything due to `peer` (arriving on
  // `peer_local` from `from`), then processes its events and delivers to its handles.
  void Drive(DriverRuntime& rt, DriverRuntime& peer, endpoint::LocalId peer_local,
             const endpoint::PeerAddress& from) {
    rt.ApplyWakes();
    endpoint::Transmit tx;
    while (size_t n = rt.endpoint().PollTransmit(now_, buffer_.data(), buffer_.size(), &tx)) {
      peer.endpoint().OnDatagram(now_, peer_local, from,
                                 std::span<const uint8_t>(buffer_.data(), n), tx.ecn);
      peer.ProcessEndpointEvents();
      ++datagrams_;
    }
    rt.ProcessEndpointEvents();
    rt.DeliverAll(now_);
  }

  FakeDriver server_driver_, client_driver_;
  DriverRuntime server_, client_;
  Time now_ = Time::FromNanoseconds(1'000'000'000);
  std::vector<uint8_t> buffer_ = std::vector<uint8_t>(65536);
  uint64_t datagrams_ = 0;
};

ListenOptions Listening() {
  ListenOptions lo;
  lo.config = ::longhaul::testing::LoopbackTestConfig();
  return lo;
}

ConnectOptions Connecting(std::string app_data = "") {
  ConnectOptions co;
  co.config = ::longhaul::testing::LoopbackTestConfig();
  co.app_data = std::move(app_data);
  return co;
}

bool Done(ConnectWait& w) {
  std::lock_guard<std::mutex> l(w.mu);
  return w.done;
}

std::shared_ptr<ConnectionHandle> Connected(RuntimePair& pair, ConnectOptions co = Connecting()) {
  std::shared_ptr<ConnectWait> wait = pair.Connect(std::move(co));
  EXPECT_TRUE(pair.RunUntil([&] { return Done(*wait); }));
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> h =
      DriverRuntime::WaitConnect(*wait, Duration::Zero(), "server");
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *h : nullptr;
}

// Listens on the server (Listening()), then Connected; null, with a test failure, when the
// listen failed.
std::shared_ptr<ConnectionHandle> ListeningAndConnected(RuntimePair& pair,
                                                        ConnectOptions co = Connecting()) {
  const absl::Status listen = pair.server().Listen(kServerLocal, Listening());
  EXPECT_TRUE(listen.ok()) << listen;
  if (!listen.ok()) return nullptr;
  return Connected(pair, std::move(co));
}

// The server's next accepted connection, once the pair has run until there is one; null
// if none came.
std::shared_ptr<ConnectionHandle> Accepted(RuntimePair& pair) {
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> server;
  EXPECT_TRUE(pair.RunUntil([&] {
    server = pair.server().Accept(Duration::Zero());
    return server.ok();
  }));
  return server.ok() ? *server : nullptr;
}

TEST(DriverRuntimeTest, ConnectCompletesAndTheServerQueuesTheConnection) {
  RuntimePair pair;
  std::shared_ptr<ConnectionHandle> client = ListeningAndConnected(pair, Connecting("hello=1"));
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->info().is_server);
  EXPECT_EQ(client->info().local_address, "local-7");
  EXPECT_FALSE(client->closed());
  // The queued connection, until it is taken.
  pair.RunUntil([] { return false; }, Duration::Milliseconds(5));
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> server = pair.server().Accept(Duration::Zero());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE((*server)->info().is_server);
  EXPECT_EQ((*server)->info().peer_app_data, "hello=1");
  EXPECT_EQ((*server)->info().peer_id, client->info().local_id);
  EXPECT_EQ((*server)->info().local_id, client->info().peer_id);
  EXPECT_FALSE(pair.server().Accept(Duration::Zero()).ok());  // only one
}

TEST(DriverRuntimeTest, AnAcceptCallbackTakesTheConnectionInsteadOfTheQueue) {
  RuntimePair pair;
  std::vector<std::shared_ptr<ConnectionHandle>> accepted;
  ListenOptions lo = Listening();
  lo.on_accept = [&](std::shared_ptr<ConnectionHandle> h) { accepted.push_back(std::move(h)); };
  ASSERT_OK(pair.server().Listen(kServerLocal, std::move(lo)));
  std::shared_ptr<ConnectionHandle> client = Connected(pair);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(pair.RunUntil([&] { return !accepted.empty(); }));
  EXPECT_EQ(accepted.size(), 1u);
  EXPECT_FALSE(pair.server().Accept(Duration::Zero()).ok());
}

TEST(DriverRuntimeTest, ARefusingPolicyFailsTheConnect) {
  RuntimePair pair;
  ListenOptions lo = Listening();
  lo.policy = [](const endpoint::HelloInfo& h) -> absl::StatusOr<TransportConfig> {
    return absl::PermissionDeniedError("not you");
  };
  ASSERT_OK(pair.server().Listen(kServerLocal, std::move(lo)));
  std::shared_ptr<ConnectWait> wait = pair.Connect(Connecting());
  ASSERT_TRUE(pair.RunUntil([&] { return Done(*wait); }));
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> h =
      DriverRuntime::WaitConnect(*wait, Duration::Zero(), "server");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.status().message(), HasSubstr("not you"));
  // The client's local is handed back to the driver to close.
  EXPECT_THAT(pair.client_driver().closed_locals, ::testing::Contains(kClientLocal));
}

TEST(DriverRuntimeTest, AMessageGoesThroughTheHandlesAndStatsArePublished) {
  RuntimePair pair;
  std::shared_ptr<ConnectionHandle> client = ListeningAndConnected(pair);
  ASSERT_NE(client, nullptr);
  std::shared_ptr<ConnectionHandle> server = Accepted(pair);
  ASSERT_NE(server, nullptr);
  std::vector<uint8_t> message(100'000);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> into(message.size());
  ASSERT_TRUE(server->PostReceive(into.data(), into.size(), 42).ok());
  absl::StatusOr<uint64_t> id = client->Send(SendBuffer{message.data(), message.size()}, 9);
  ASSERT_TRUE(id.ok()) << id.status();
  Event received, sent;
  bool got_received = false, got_sent = false;
  ASSERT_TRUE(pair.RunUntil([&] {
    if (!got_received) got_received = server->Poll(&received);
    if (!got_sent) got_sent = client->Poll(&sent);
    return got_received && got_sent;
  }));
  EXPECT_EQ(received.type, Event::Type::kReceiveComplete);
  EXPECT_EQ(received.tag, 42u);
  EXPECT_EQ(received.size, message.size());
  EXPECT_EQ(into, message);
  EXPECT_EQ(sent.type, Event::Type::kSendComplete);
  EXPECT_EQ(sent.tag, 9u);
  EXPECT_EQ(sent.message_id, *id);
  // Stats reach the handle every kStatsPublishPeriod.
  pair.RunUntil([] { return false; }, DriverRuntime::kStatsPublishPeriod * 3);
  const uint64_t segment = client->config().segment;
  EXPECT_GE(client->stats().data_packets_sent, (message.size() + segment - 1) / segment);
  EXPECT_GT(client->debug_state().srtt, Duration::Zero());
  EndpointStats fresh, stats;
  pair.server().AddStats(&fresh);
  EXPECT_GE(fresh.hellos_received, 1u);
  EXPECT_EQ(fresh.connections_accepted, 1u);
  stats.hellos_received = 5;  // added to, not overwritten
  pair.server().AddStats(&stats);
  EXPECT_EQ(stats.hellos_received, fresh.hellos_received + 5);
}

TEST(DriverRuntimeTest, SendsFromAnotherThreadWakeTheDriverOncePerBatch) {
  RuntimePair pair;
  std::shared_ptr<ConnectionHandle> client = ListeningAndConnected(pair);
  ASSERT_NE(client, nullptr);
  const int wakes_before = pair.client_driver().wakes;
  std::vector<uint8_t> message(3000, 0x5A);
  std::thread app([&] {
    for (uint64_t tag = 1; tag <= 3; ++tag) {
      EXPECT_TRUE(client->Send(SendBuffer{message.data(), message.size()}, tag).ok());
    }
  });
  app.join();
  EXPECT_EQ(pair.client_driver().wakes, wakes_before + 1);
  std::vector<uint64_t> completed;
  ASSERT_TRUE(pair.RunUntil([&] {
    Event e;
    while (client->Poll(&e)) {
      if (e.type == Event::Type::kSendComplete) completed.push_back(e.tag);
    }
    return completed.size() == 3;
  }));
  EXPECT_EQ(completed, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(DriverRuntimeTest, CloseEndsBothHandlesCleanly) {
  RuntimePair pair;
  std::shared_ptr<ConnectionHandle> client = ListeningAndConnected(pair);
  ASSERT_NE(client, nullptr);
  std::shared_ptr<ConnectionHandle> server = Accepted(pair);
  ASSERT_NE(server, nullptr);
  client->Close();
  ASSERT_TRUE(pair.RunUntil([&] { return client->closed() && server->closed(); },
                            Duration::Seconds(10)));
  EXPECT_TRUE(client->status().ok()) << client->status();
  EXPECT_TRUE(server->status().ok()) << server->status();
  // Reaped: the client's local goes back to the driver.
  EXPECT_THAT(pair.client_driver().closed_locals, ::testing::Contains(kClientLocal));
}

TEST(DriverRuntimeTest, ShutdownCancelsHandlesPendingConnectsAndAccept) {
  RuntimePair pair;
  std::shared_ptr<ConnectionHandle> client = ListeningAndConnected(pair);
  ASSERT_NE(client, nullptr);
  // A second handshake that never gets an answer (the server is not driven).
  auto pending = std::make_shared<ConnectWait>();
  pair.client().StartConnect(pair.now(), Address(1), {kClientLocal + 1}, Connecting(), pending);
  pair.client().BeginShutdown(pair.now());
  pair.client().FinishShutdown(pair.now());
  EXPECT_TRUE(client->closed());
  EXPECT_TRUE(absl::IsCancelled(client->status())) << client->status();
  ASSERT_TRUE(Done(*pending));
  EXPECT_FALSE(DriverRuntime::WaitConnect(*pending, Duration::Zero(), "server").ok());
  EXPECT_FALSE(pair.client().Accept(Duration::Seconds(1)).ok());  // ends at once
}

}  // namespace
}  // namespace longhaul::datapath
