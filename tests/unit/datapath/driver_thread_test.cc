// DriverThread with a driver loop that has no I/O: it sleeps on a condition variable that
// the wake hook signals. Posting and its order, running on the thread (inline from the
// thread itself), the thread's name, the stop and join protocol, work posted before the
// stop, and the published stats.
#include "transport/datapath/driver_thread.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::datapath {
namespace {

constexpr auto kWaitLimit = std::chrono::seconds(30);  // only a stuck thread reaches it
constexpr uint64_t kShutdownDatagrams = 99;            // what the loop's shutdown publishes

// A driver: the loop of driver_thread.h, sleeping until woken. With `run_posted` false
// it leaves posted work alone until it stops (StopPosting runs it then).
class FakeDriver {
 public:
  explicit FakeDriver(bool run_posted = true)
      : run_posted_(run_posted), thread_([this] { Wake(); }) {}
  ~FakeDriver() { thread_.Shutdown(); }  // before what the loop uses goes

  void Start(uint32_t engine = 0) {
    EngineSlot slot;
    slot.index = engine;
    thread_.Start(slot, [this] { Loop(); });
  }
  DriverThread& thread() { return thread_; }
  bool loop_returned() const { return loop_returned_.load(); }
  int wakes() {
    std::lock_guard<std::mutex> l(mu_);
    return wakes_;
  }

 private:
  void Wake() {
    std::lock_guard<std::mutex> l(mu_);
    ++wakes_;
    woken_ = true;
    cv_.notify_all();
  }

  void Loop() {
    while (true) {
      if (run_posted_) thread_.RunPosted();
      if (thread_.stop_requested()) {
        EndpointStats s;
        s.datagrams_sent = kShutdownDatagrams;
        thread_.Publish(s);
        thread_.StopPosting();
        loop_returned_ = true;
        return;
      }
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return woken_; });
      woken_ = false;
    }
  }

  const bool run_posted_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
  int wakes_ = 0;
  std::atomic<bool> loop_returned_{false};
  DriverThread thread_;  // last: destroyed (joined) first
};

std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(DriverThreadTest, PostRunsOnTheNamedThreadInOrder) {
  FakeDriver d;
  d.Start(3);
  EXPECT_FALSE(d.thread().OnThread());
  std::promise<std::thread::id> ran_on;
  std::promise<std::string> name;
  bool on_thread = false;
  ASSERT_TRUE(d.thread().Post([&] {
    on_thread = d.thread().OnThread();
    name.set_value(ThreadName());
    ran_on.set_value(std::this_thread::get_id());
  }));
  std::future<std::thread::id> f = ran_on.get_future();
  ASSERT_EQ(f.wait_for(kWaitLimit), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  EXPECT_TRUE(on_thread);
  EXPECT_EQ(name.get_future().get(), "lh-engine-3");
  EXPECT_GE(d.wakes(), 1);

  std::vector<int> order;  // written on the driver thread only
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(d.thread().Post([&order, i] { order.push_back(i); }));
  d.thread().RunOnThread([] {});  // runs after everything posted before it
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(DriverThreadTest, RunOnThreadWaitsAndRunsInlineOnTheThread) {
  FakeDriver d;
  d.Start();
  std::thread::id outer_id, inner_id;
  d.thread().RunOnThread([&] { outer_id = std::this_thread::get_id(); });
  EXPECT_NE(outer_id, std::this_thread::get_id());  // ran, and RunOnThread waited for it

  bool inner_ran_before_return = false;
  ASSERT_TRUE(d.thread().Post([&] {
    bool inner_ran = false;
    d.thread().RunOnThread([&] {
      inner_ran = true;
      inner_id = std::this_thread::get_id();
    });
    inner_ran_before_return = inner_ran;
  }));
  d.thread().RunOnThread([] {});  // after the posted work
  EXPECT_TRUE(inner_ran_before_return);
  EXPECT_EQ(inner_id, outer_id);
}

TEST(DriverThreadTest, ShutdownRunsTheLoopsShutdownJoinsAndIsIdempotent) {
  FakeDriver d;
  d.Start();
  d.thread().RunOnThread([] {});  // the loop is running
  EXPECT_FALSE(d.thread().stop_requested());
  d.thread().Shutdown();
  EXPECT_TRUE(d.loop_returned());  // joined: the loop's shutdown has finished
  EXPECT_TRUE(d.thread().stop_requested());
  EXPECT_EQ(d.thread().Published().datagrams_sent, kShutdownDatagrams);
  d.thread().Shutdown();
  // Concurrent calls after the stop return as well; a new thread (which may be given the
  // stopped thread's id) is not the driver thread.
  bool other_on_thread = true;
  std::thread other([&] {
    other_on_thread = d.thread().OnThread();
    d.thread().Shutdown();
  });
  d.thread().Shutdown();
  other.join();
  EXPECT_FALSE(other_on_thread);
  EXPECT_FALSE(d.thread().OnThread());
  EXPECT_TRUE(d.loop_returned());
}

TEST(DriverThreadTest, ShutdownFromTheThreadStopsAfterTheTurn) {
#ifndef NDEBUG
  GTEST_SKIP() << "Shutdown from the driver thread is LOG(DFATAL): fatal in debug builds";
#endif
  FakeDriver d;
  d.Start();
  bool returned_at_once = false;
  d.thread().RunOnThread([&] {
    d.thread().Shutdown();  // logs "Endpoint::Close called from an event callback"
    returned_at_once = d.thread().stop_requested() && !d.loop_returned();
  });
  EXPECT_TRUE(returned_at_once);
  d.thread().Shutdown();  // joins the loop, which stopped after that turn
  EXPECT_TRUE(d.loop_returned());
}

TEST(DriverThreadTest, AfterShutdownPostFailsAndNothingRuns) {
  FakeDriver d;
  d.Start();
  d.thread().Shutdown();
  bool ran = false;
  EXPECT_FALSE(d.thread().Post([&] { ran = true; }));
  d.thread().RunOnThread([&] { ran = true; });  // returns without running
  // FreshStats: the last published copy, the publisher not run.
  EXPECT_EQ(d.thread().FreshStats([&] { ran = true; }).datagrams_sent, kShutdownDatagrams);
  EXPECT_FALSE(ran);
}

TEST(DriverThreadTest, ShutdownWithoutStartRefusesPosts) {
  FakeDriver d;
  d.thread().Shutdown();
  EXPECT_TRUE(d.thread().stop_requested());
  EXPECT_FALSE(d.thread().Post([] { ADD_FAILURE() << "ran after Shutdown"; }));
}

TEST(DriverThreadTest, WorkPostedBeforeTheStopRunsWhenPostingStops) {
  FakeDriver d(/*run_posted=*/false);
  d.Start();
  std::thread::id ran_on;
  ASSERT_TRUE(d.thread().Post([&] { ran_on = std::this_thread::get_id(); }));
  d.thread().Shutdown();  // the loop's StopPosting runs it, on the driver thread
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(DriverThreadTest, PublishedStatsRoundTrip) {
  FakeDriver d;
  d.Start();
  EXPECT_EQ(d.thread().Published().datagrams_sent, 0u);
  d.thread().RunOnThread([&] {
    EndpointStats s;
    s.datagrams_sent = 7;
    s.bytes_received = 1234;
    s.send_blocked = 5;
    s.cpu_s = -1;  // Publish sets the thread's CPU time
    d.thread().Publish(s);
  });
  const EndpointStats got = d.thread().Published();
  EXPECT_EQ(got.datagrams_sent, 7u);
  EXPECT_EQ(got.bytes_received, 1234u);
  EXPECT_EQ(got.send_blocked, 5u);
  EXPECT_GE(got.cpu_s, 0.0);

  bool published_on_thread = false;
  const EndpointStats fresh = d.thread().FreshStats([&] {
    published_on_thread = d.thread().OnThread();
    EndpointStats s;
    s.datagrams_sent = 8;
    d.thread().Publish(s);
  });
  EXPECT_TRUE(published_on_thread);
  EXPECT_EQ(fresh.datagrams_sent, 8u);
}

}  // namespace
}  // namespace longhaul::datapath
