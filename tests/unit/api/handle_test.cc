// ConnectionHandle semantics across threads: concurrent submitters, ordered ids, a
// callback set after events were queued, bounded waits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/api/endpoint.h"

namespace longhaul {
namespace {

constexpr Duration kWait = Duration::Seconds(20);

TransportConfig Cfg() {
  TransportConfig c;
  c.rate = Bandwidth::Gbps(2);
  c.initial_rtt = Duration::Milliseconds(1);
  return c;
}

struct Pair {
  std::unique_ptr<Endpoint> server, client;
  std::shared_ptr<ConnectionHandle> s, c;
};

EndpointOptions Insecure() {
  EndpointOptions eo;
  eo.security = endpoint::SecurityConfig::Insecure();
  return eo;
}

Pair Connect() {
  Pair p;
  p.server = *Endpoint::Create(Insecure());
  ListenOptions lo;
  lo.config = Cfg();
  absl::StatusOr<uint16_t> port = p.server->Listen("127.0.0.1", 0, lo);
  EXPECT_TRUE(port.ok());
  p.client = *Endpoint::Create(Insecure());
  ConnectOptions co;
  co.config = Cfg();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> c = p.client->Connect("127.0.0.1", *port, co);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<ConnectionHandle>> s = p.server->Accept(kWait);
  EXPECT_TRUE(s.ok());
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

TEST(ConnectionHandle, WaitTimesOutAndValidatesArguments) {
  Pair p = Connect();
  Event e;
  EXPECT_FALSE(p.s->Wait(&e, Duration::Milliseconds(20)));
  EXPECT_FALSE(p.c->Send(SendBuffer{nullptr, 10}, 0).ok());
  EXPECT_FALSE(p.c->PostReceive(nullptr, 10, 0).ok());
  p.c->Abort("test says bye");
  ASSERT_TRUE(p.s->WaitClosed(kWait));
  EXPECT_NE(p.s->status().message().find("test says bye"), std::string::npos) << p.s->status();
  EXPECT_FALSE(p.s->Wait(&e, Duration::Milliseconds(20)) && e.type != Event::Type::kClosed);
}

}  // namespace
}  // namespace longhaul
