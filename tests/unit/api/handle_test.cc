// ConnectionHandle semantics across threads: concurrent submitters, ordered ids, a
// callback set after events were queued, bounded waits, an application that stops reading.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_config.h"
#include "transport/api/endpoint.h"

namespace longhaul {
namespace {

constexpr Duration kWait = Duration::Seconds(20);

struct Pair {
  std::unique_ptr<Endpoint> server, client;
  std::shared_ptr<ConnectionHandle> s, c;
};

EndpointOptions Insecure() {
  EndpointOptions eo;
  eo.security = endpoint::SecurityConfig::Insecure();
  return eo;
}

// A server and a client endpoint, both with `cfg`, and the connection between them (its
// handles null, with a test failure, when it could not be made).
Pair Connect(const TransportConfig& cfg = testing::LoopbackTestConfig()) {
  Pair p;
  p.server = *Endpoint::Create(Insecure());
  ListenOptions lo;
  lo.config = cfg;
  absl::StatusOr<uint16_t> port = p.server->Listen("127.0.0.1", 0, lo);
  EXPECT_TRUE(port.ok());
  if (!port.ok()) return p;
  p.client = *Endpoint::Create(Insecure());
  ConnectOptions co;
  co.config = cfg;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = p.client->Connect("127.0.0.1", *port, co);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return p;
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = p.server->Accept(kWait);
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return p;
  p.c = *c;
  p.s = *s;
  return p;
}

TEST(ConnectionHandle, ConcurrentSendersGetDistinctIdsAndEveryMessageArrives) {
  Pair p = Connect();
  constexpr int kThreads = 4, kPerThread = 250;
  static const uint8_t kData[4096] = {};
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<uint64_t> id = p.c->Send(SendBuffer{kData, 1000u + t}, t);
        ASSERT_TRUE(id.ok());
        ids[t].push_back(*id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint64_t> all;
  for (auto& v : ids) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(v.begin(), v.end());
  }
  ASSERT_EQ(all.size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(*all.rbegin(), uint64_t{kThreads * kPerThread - 1});
  // The receiver sees them in id order; each has the size its thread used.
  uint64_t next = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (next < all.size() && std::chrono::steady_clock::now() < end) {
    Event e;
    if (!p.s->Wait(&e, Duration::Milliseconds(100))) continue;
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_EQ(e.message_id, next);
    int thread = -1;
    for (int t = 0; t < kThreads; ++t) {
      if (std::find(ids[t].begin(), ids[t].end(), next) != ids[t].end()) thread = t;
    }
    EXPECT_EQ(e.size, 1000u + thread);
    p.s->ReturnBuffer(std::move(e.owned));
    ++next;
  }
  EXPECT_EQ(next, all.size());
}

TEST(ConnectionHandle, CallbackSetLaterReceivesQueuedEventsFirstInOrder) {
  Pair p = Connect();
  static const uint8_t kData[100] = {};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(p.c->Send(SendBuffer{kData, 100}, i).ok());
  // Wait until all ten sends completed (so they are queued on the client handle).
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.c->stats().messages_sent < 10 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(p.c->stats().messages_sent, 10u);
  std::mutex mu;
  std::vector<uint64_t> tags;
  std::atomic<bool> on_driver{true};
  const auto me = std::this_thread::get_id();
  p.c->SetCallback([&](Event& e) {
    if (std::this_thread::get_id() == me) on_driver = false;
    if (e.type != Event::Type::kSendComplete) return;
    std::lock_guard<std::mutex> l(mu);
    tags.push_back(e.tag);
  });
  ASSERT_TRUE(p.c->Send(SendBuffer{kData, 100}, 10).ok());
  end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (tags.size() == 11) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(tags.size(), 11u);
  for (uint64_t i = 0; i < 11; ++i) EXPECT_EQ(tags[i], i);
  EXPECT_TRUE(on_driver.load());
  Event e;
  EXPECT_FALSE(p.c->Poll(&e));  // everything went to the callback
}

// A callback set only after the connection ended (a server that closed it right after the
// handshake, before the application got to it) still receives the queued events, the
// kClosed last, at once on the setting thread: no driver thread is left to flush them.
TEST(ConnectionHandle, CallbackSetAfterTheConnectionEndedStillSeesItsClose) {
  Pair p = Connect();
  ASSERT_NE(p.c, nullptr);
  p.s->Close();
  ASSERT_TRUE(p.c->WaitClosed(kWait));
  p.client->Close();  // the handle is detached from its driver now
  std::vector<Event::Type> seen;
  absl::Status close_status = absl::UnknownError("no kClosed");
  p.c->SetCallback([&](Event& e) {  // runs on this thread, before SetCallback returns
    seen.push_back(e.type);
    if (e.type == Event::Type::kClosed) close_status = e.status;
  });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), Event::Type::kClosed);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), Event::Type::kClosed), 1);
  EXPECT_TRUE(close_status.ok()) << close_status;  // the peer's clean close
  Event e;
  EXPECT_FALSE(p.c->Poll(&e));
}

// An application that stops taking its events: the receive credit counts what waits in
// its queue, so the sender stops within one recv_window, and everything arrives intact
// once the application reads again.
TEST(ConnectionHandle, AReceiverThatStopsReadingStallsItsSenderUntilItReadsAgain) {
  TransportConfig cfg = testing::LoopbackTestConfig();
  cfg.recv_window = 1 << 20;
  Pair p = Connect(cfg);
  ASSERT_TRUE(p.c && p.s);

  constexpr size_t kMessage = 256 << 10, kCount = 64;  // 16 MiB: 16 windows
  std::vector<uint8_t> data(kMessage * kCount);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + i / 4093);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(p.c->Send(SendBuffer{data.data() + i * kMessage, kMessage}, i).ok());
  }
  // The sender runs into the credit while the server's application takes nothing.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.c->stats().flow_control_blocked == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GT(p.c->stats().flow_control_blocked, 0u) << "the sender never ran into the credit";
  // A second of the sender's completions: at most a window (and the message at its edge)
  // completes while nobody reads; without the bound all 16 MiB would (it takes ~70 ms).
  uint64_t completed = 0;
  const auto watch_end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  Event e;
  while (std::chrono::steady_clock::now() < watch_end) {
    if (p.c->Wait(&e, Duration::Milliseconds(50)) && e.type == Event::Type::kSendComplete) {
      ASSERT_TRUE(e.status.ok()) << e.status;
      ++completed;
    }
  }
  const uint64_t bound = cfg.recv_window / kMessage + 2;
  EXPECT_LE(completed, bound);
  EXPECT_LE(p.s->stats().messages_received, bound);
  EXPECT_GT(p.c->unsent_bytes(), 0u);

  // Reading again: every message arrives, in order and intact, and every send completes.
  uint64_t next = 0;
  end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (next < kCount && std::chrono::steady_clock::now() < end) {
    if (!p.s->Wait(&e, Duration::Milliseconds(100))) continue;
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_TRUE(e.status.ok()) << e.status;
    ASSERT_EQ(e.message_id, next);
    ASSERT_EQ(e.size, kMessage);
    ASSERT_EQ(0, std::memcmp(e.data, data.data() + next * kMessage, kMessage)) << next;
    p.s->ReturnBuffer(std::move(e.owned));
    ++next;
  }
  EXPECT_EQ(next, kCount);
  while (completed < kCount && std::chrono::steady_clock::now() < end) {
    if (p.c->Wait(&e, Duration::Milliseconds(100)) && e.type == Event::Type::kSendComplete) {
      ASSERT_TRUE(e.status.ok()) << e.status;
      ++completed;
    }
  }
  EXPECT_EQ(completed, kCount);
}

TEST(ConnectionHandle, WaitTimesOutAndValidatesArguments) {
  Pair p = Connect();
  Event e;
  EXPECT_FALSE(p.s->Wait(&e, Duration::Milliseconds(20)));
  EXPECT_FALSE(p.c->Send(SendBuffer{nullptr, 10}, 0).ok());
  EXPECT_FALSE(p.c->PostReceive(nullptr, 10, 0).ok());
  // The reason crosses the network: the peer shows it printable (no forged log lines).
  p.c->Abort("test says bye\nE1205 12:00:00 forged");
  ASSERT_TRUE(p.s->WaitClosed(kWait));
  EXPECT_NE(p.s->status().message().find("test says bye\\x0aE1205 12:00:00 forged"),
            std::string::npos)
      << p.s->status();
  EXPECT_FALSE(p.s->Wait(&e, Duration::Milliseconds(20)) && e.type != Event::Type::kClosed);
}

// Offered buffers over a datapath that places nothing (UDP): a keyed message arrives as
// any other, the offer comes back by WithdrawOffer at once; a key offered twice comes
// back with the reason; bad keys are refused on the spot; the close hands back the rest.
TEST(ConnectionHandle, OffersComeBackByWithdrawalOrClose) {
  Pair p = Connect();
  std::vector<uint8_t> a(8192), b(8192), c(8192);
  EXPECT_EQ(p.s->OfferReceive(0, a.data(), a.size()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.s->OfferReceive(uint64_t{1} << 63, a.data(), a.size()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.s->OfferReceive(5, nullptr, 10).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(p.s->OfferReceive(5, a.data(), a.size()).ok());
  ASSERT_TRUE(p.s->OfferReceive(5, b.data(), b.size()).ok()) << "checked by the driver";
  ASSERT_TRUE(p.s->OfferReceive(6, c.data(), c.size()).ok());
  static const uint8_t kData[3000] = {7};
  SendBuffer keyed{kData, sizeof(kData)};
  keyed.placement_key = 5;
  ASSERT_TRUE(p.c->Send(std::move(keyed), 1).ok());
  Event e;
  ASSERT_TRUE(p.s->Wait(&e, kWait));
  EXPECT_EQ(e.type, Event::Type::kOfferWithdrawn) << "the second offer of key 5";
  EXPECT_EQ(e.tag, 5u);
  EXPECT_EQ(e.data, b.data());
  EXPECT_EQ(e.status.code(), absl::StatusCode::kAlreadyExists) << e.status;
  ASSERT_TRUE(p.s->Wait(&e, kWait));
  ASSERT_EQ(e.type, Event::Type::kReceiveComplete);
  EXPECT_NE(e.data, a.data()) << "nothing placed on UDP";
  EXPECT_EQ(e.size, sizeof(kData));
  EXPECT_EQ(e.data[0], 7);
  p.s->WithdrawOffer(5);
  ASSERT_TRUE(p.s->Wait(&e, kWait));
  EXPECT_EQ(e.type, Event::Type::kOfferWithdrawn);
  EXPECT_EQ(e.tag, 5u);
  EXPECT_EQ(e.data, a.data());
  EXPECT_TRUE(e.status.ok()) << e.status;
  p.c->Close();
  ASSERT_TRUE(p.s->Wait(&e, kWait));
  EXPECT_EQ(e.type, Event::Type::kOfferWithdrawn) << "offer 6, at the close";
  EXPECT_EQ(e.tag, 6u);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(p.s->Wait(&e, kWait));
  EXPECT_EQ(e.type, Event::Type::kClosed);
  EXPECT_FALSE(p.s->OfferReceive(7, a.data(), a.size()).ok()) << "closed";
}

}  // namespace
}  // namespace longhaul
