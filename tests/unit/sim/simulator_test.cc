#include "transport/sim/simulator.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/link_spec.h"

namespace longhaul::sim {
namespace {

using ::longhaul::testing::ParseTestLinkSpec;

uint8_t PatternByte(uint64_t seq, size_t i) { return static_cast<uint8_t>(seq * 131 + i * 7); }

// Sends `count` datagrams of `size` bytes, one every `gap` (all at once for a zero gap),
// each carrying its sequence number and a pattern, ECN-capable if asked.
class FakeSender : public SimNode {
 public:
  FakeSender(uint64_t count, size_t size, Duration gap, Time start, bool ect = false)
      : count_(count), size_(size), gap_(gap), next_(start), ect_(ect) {}
  void OnDatagram(Time now, std::span<const uint8_t> d, Ecn) override {
    ++acks_;
    last_ack_ = now;
  }
  void OnTimeout(Time) override { ++timeouts_; }
  size_t PollTransmit(Time now, uint8_t* buf, size_t cap, TransmitInfo* info) override {
    if (sent_ == count_ || now < next_) return 0;
    std::memcpy(buf, &sent_, 8);
    for (size_t i = 8; i < size_; ++i) buf[i] = PatternByte(sent_, i);
    send_times_.push_back(now);
    info->ecn = ect_ ? Ecn::kEct0 : Ecn::kNotEct;
    ++sent_;
    next_ = next_ + gap_;
    return size_;
  }
  Time NextTimeout() const override { return sent_ == count_ ? Time::Infinite() : next_; }

  uint64_t sent() const { return sent_; }
  uint64_t acks() const { return acks_; }
  uint64_t timeouts() const { return timeouts_; }
  const std::vector<Time>& send_times() const { return send_times_; }

 private:
  uint64_t count_;
  size_t size_;
  Duration gap_;
  Time next_;
  bool ect_;
  uint64_t sent_ = 0;
  uint64_t acks_ = 0;
  uint64_t timeouts_ = 0;
  Time last_ack_;
  std::vector<Time> send_times_;
};

// Records arrivals and answers every `ack_every`-th with a 40-byte datagram.
class FakeReceiver : public SimNode {
 public:
  struct Arrival {
    Time at;
    uint64_t seq;
    bool intact;
    Ecn ecn;
  };
  explicit FakeReceiver(int ack_every = 0) : ack_every_(ack_every) {}
  void OnDatagram(Time now, std::span<const uint8_t> d, Ecn ecn) override {
    uint64_t seq;
    std::memcpy(&seq, d.data(), 8);
    bool intact = true;
    for (size_t i = 8; i < d.size(); ++i) intact &= d[i] == PatternByte(seq, i);
    arrivals_.push_back({now, seq, intact, ecn});
    if (ack_every_ > 0 && arrivals_.size() % ack_every_ == 0) ++acks_owed_;
  }
  void OnTimeout(Time) override {}
  size_t PollTransmit(Time, uint8_t* buf, size_t, TransmitInfo*) override {
    if (acks_owed_ == 0) return 0;
    --acks_owed_;
    std::memset(buf, 0, 40);
    return 40;
  }
  Time NextTimeout() const override { return Time::Infinite(); }
  const std::vector<Arrival>& arrivals() const { return arrivals_; }

 private:
  int ack_every_;
  uint64_t acks_owed_ = 0;
  std::vector<Arrival> arrivals_;
};

struct RunResult {
  uint64_t hash;
  std::vector<FakeReceiver::Arrival> arrivals;
  StopReason reason;
  LinkCounters fwd;
};

// 1000-byte datagrams every 9 us: 1028 wire bytes take 8.2 us at 1 Gbit/s, no queue drops.
RunResult RunOnce(const std::string& link, uint64_t seed, uint64_t count = 20000) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec(link);
  opt.seed = seed;
  opt.max_datagram = 2048;
  Simulator sim(opt);
  FakeSender tx(count, 1000, Duration::Microseconds(9), Time::Zero());
  FakeReceiver rx(8);
  sim.AddPair(&tx, &rx);
  StopReason r = sim.Run(Time::FromNanoseconds(int64_t{10} * 1000000000), nullptr);
  return {sim.trace_hash(), rx.arrivals(), r, sim.forward().Finish(sim.now())};
}

TEST(SimulatorTest, DeliversAtSerialisationPlusDelay) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=10ms");
  Simulator sim(opt);
  // 972 + 28 = 1000 wire bytes = 8 us each; sent every 10 us so no queueing.
  FakeSender tx(100, 972, Duration::Microseconds(10), Time::Zero());
  FakeReceiver rx(10);
  sim.AddPair(&tx, &rx);
  EXPECT_EQ(sim.Run(Time::FromNanoseconds(1000000000), nullptr), StopReason::kIdle);
  ASSERT_EQ(rx.arrivals().size(), 100u);
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(rx.arrivals()[i].seq, i);
    EXPECT_TRUE(rx.arrivals()[i].intact);
    EXPECT_EQ(rx.arrivals()[i].at, tx.send_times()[i] + Duration::Microseconds(5008));
  }
  // Acks went back over the reverse direction: 40 + 28 bytes, 0.544 us, plus 5 ms.
  EXPECT_EQ(tx.acks(), 10u);
  EXPECT_EQ(sim.reverse().counters().delivered, 10u);
  EXPECT_EQ(sim.counters().datagrams_sent, 110u);
}

TEST(SimulatorTest, SameSeedSameRunDifferentSeedDifferentRun) {
  const std::string link = "rate=1gbit,rtt=10ms,loss=0.01,jitter=100us,reorder=0.01,dup=0.01";
  RunResult a = RunOnce(link, 1), b = RunOnce(link, 1), c = RunOnce(link, 2);
  EXPECT_EQ(a.hash, b.hash);
  ASSERT_EQ(a.arrivals.size(), b.arrivals.size());
  for (size_t i = 0; i < a.arrivals.size(); ++i) {
    ASSERT_EQ(a.arrivals[i].at, b.arrivals[i].at);
    ASSERT_EQ(a.arrivals[i].seq, b.arrivals[i].seq);
  }
  EXPECT_NE(a.hash, c.hash);
  EXPECT_NE(a.fwd.dropped_loss, 0u);
}

TEST(SimulatorTest, ReorderDupCorruptReachTheReceiver) {
  RunResult r = RunOnce("rate=1gbit,rtt=10ms,reorder=0.05,dup=0.05,corrupt=0.05", 3);
  uint64_t out_of_order = 0, corrupted = 0;
  uint64_t max_seq = 0;
  for (const auto& a : r.arrivals) {
    if (a.seq < max_seq) ++out_of_order;
    max_seq = std::max(max_seq, a.seq);
    corrupted += !a.intact;
  }
  EXPECT_EQ(r.arrivals.size(), 20000 + r.fwd.duplicated);
  EXPECT_GT(r.fwd.duplicated, 700u);
  EXPECT_GT(out_of_order, 700u);
  // A flipped bit in the 8-byte sequence number can make a packet look intact or
  // out of order, so the count is close to, not exactly, the link's.
  EXPECT_NEAR(static_cast<double>(corrupted), static_cast<double>(r.fwd.corrupted), 20);
  EXPECT_GT(r.fwd.corrupted, 700u);
}

TEST(SimulatorTest, SharedBottleneckSerialisesAllPairs) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=2ms,queue=100MB");
  Simulator sim(opt);
  // Three senders each burst 1000 x 1000 wire bytes at t=0: 3 MB through 1 Gbit/s = 24 ms.
  std::vector<std::unique_ptr<FakeSender>> tx;
  std::vector<std::unique_ptr<FakeReceiver>> rx;
  for (int i = 0; i < 3; ++i) {
    tx.push_back(std::make_unique<FakeSender>(1000, 972, Duration::Zero(), Time::Zero()));
    rx.push_back(std::make_unique<FakeReceiver>());
    EXPECT_EQ(sim.AddPair(tx.back().get(), rx.back().get()), i);
  }
  sim.Run(Time::FromNanoseconds(1000000000), nullptr);
  Time last;
  for (auto& r : rx) {
    ASSERT_EQ(r->arrivals().size(), 1000u);
    last = std::max(last, r->arrivals().back().at);
  }
  EXPECT_EQ(last, Time::FromNanoseconds(24000000 + 1000000));
  EXPECT_EQ(sim.forward().counters().max_queue_bytes, 3000000u);
}

TEST(SimulatorTest, QueueOverflowDrops) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=2ms,queue=100KB");
  Simulator sim(opt);
  FakeSender tx(1000, 972, Duration::Zero(), Time::Zero());
  FakeReceiver rx;
  sim.AddPair(&tx, &rx);
  sim.Run(Time::FromNanoseconds(1000000000), nullptr);
  EXPECT_EQ(rx.arrivals().size(), 100u);
  EXPECT_EQ(sim.forward().counters().dropped_queue, 900u);
}

TEST(SimulatorTest, EcnCodepointReachesReceiver) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=2ms,ecn=10KB");
  Simulator sim(opt);
  FakeSender tx(100, 972, Duration::Zero(), Time::Zero(), /*ect=*/true);
  FakeReceiver rx;
  sim.AddPair(&tx, &rx);
  sim.Run(Time::FromNanoseconds(1000000000), nullptr);
  ASSERT_EQ(rx.arrivals().size(), 100u);
  int ce = 0, ect = 0;
  for (const auto& a : rx.arrivals()) {
    ce += a.ecn == Ecn::kCe;
    ect += a.ecn == Ecn::kEct0;
  }
  EXPECT_EQ(ect, 11);  // backlog 0..10000 bytes: not above the threshold
  EXPECT_EQ(ce, 89);
}

TEST(SimulatorTest, StopReasons) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=2ms");
  {
    Simulator sim(opt);
    FakeSender tx(1000000, 972, Duration::Microseconds(10), Time::Zero());
    FakeReceiver rx;
    sim.AddPair(&tx, &rx);
    EXPECT_EQ(sim.Run(Time::FromNanoseconds(50000000), nullptr), StopReason::kTimeLimit);
    EXPECT_EQ(sim.now(), Time::FromNanoseconds(50000000));
    EXPECT_EQ(tx.sent(), 5001u);
    EXPECT_EQ(sim.Run(Time::Infinite(), [&] { return rx.arrivals().size() >= 6000; }),
              StopReason::kDone);
    EXPECT_EQ(rx.arrivals().size(), 6000u);
  }
  {
    Simulator sim(opt);
    FakeSender tx(10, 972, Duration::Microseconds(10), Time::Zero());
    FakeReceiver rx;
    sim.AddPair(&tx, &rx);
    EXPECT_EQ(sim.Run(Time::Infinite(), nullptr), StopReason::kIdle);
  }
}

TEST(SimulatorTest, ScheduleChangesRate) {
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit,rtt=0,queue=1GB");
  absl::StatusOr<LinkSchedule> sched = ParseLinkSchedule("10ms:rate=2gbit");
  ASSERT_TRUE(sched.ok());
  opt.schedule = *sched;
  Simulator sim(opt);
  // A burst before the change serialises 8 us apart (1000 wire bytes at 1 Gbit/s), one
  // after it 4 us apart.
  FakeSender before(100, 972, Duration::Zero(), Time::Zero());
  FakeSender after(100, 972, Duration::Zero(), Time::FromNanoseconds(20000000));
  FakeReceiver rx_before, rx_after;
  sim.AddPair(&before, &rx_before);
  sim.AddPair(&after, &rx_after);
  sim.Run(Time::FromNanoseconds(1000000000), nullptr);
  ASSERT_EQ(rx_before.arrivals().size(), 100u);
  ASSERT_EQ(rx_after.arrivals().size(), 100u);
  EXPECT_EQ((rx_before.arrivals()[51].at - rx_before.arrivals()[50].at).ns(), 8000);
  EXPECT_EQ((rx_after.arrivals()[51].at - rx_after.arrivals()[50].at).ns(), 4000);
  EXPECT_EQ(rx_after.arrivals()[99].at, Time::FromNanoseconds(20000000 + 400000));
}

TEST(SimulatorTest, NodeThatNeverProgressesDoesNotHang) {
  // A node whose NextTimeout is always in the past but never sends.
  class Stuck : public SimNode {
   public:
    void OnDatagram(Time, std::span<const uint8_t>, Ecn) override {}
    void OnTimeout(Time) override { ++calls; }
    size_t PollTransmit(Time, uint8_t*, size_t, TransmitInfo*) override { return 0; }
    Time NextTimeout() const override { return Time::Zero(); }
    uint64_t calls = 0;
  };
  SimulatorOptions opt;
  opt.link = ParseTestLinkSpec("rate=1gbit");
  Simulator sim(opt);
  Stuck a, b;
  sim.AddPair(&a, &b);
  EXPECT_EQ(sim.Run(Time::FromNanoseconds(100), nullptr), StopReason::kTimeLimit);
  EXPECT_GT(sim.counters().stalls, 0u);
  EXPECT_GT(a.calls, 100u);
}

}  // namespace
}  // namespace longhaul::sim
