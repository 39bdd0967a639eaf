// Scenario tests: real longhaul Connections over the simulated link (tier `sim`).
// Bands are derived from the link (rate, delay, header overhead), not from wall time.
#include "transport/sim/scenario.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/sim/link_defaults.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kGiB = ByteCount{1} << 30;
constexpr ByteCount kMiB = ByteCount{1} << 20;

ScenarioOptions Options(const std::string& link, ByteCount bytes) {
  ScenarioOptions o = LinkDefaults(link);
  o.bytes = bytes;
  return o;
}

// Goodput of a loss-free transfer of `bytes` paced at the link rate: every packet's
// headers (at their largest) and IP/UDP overhead serialised, plus the one-way delay.
double IdealGoodput(const ScenarioOptions& o, ByteCount bytes) {
  const TransportConfig& c = o.sender_config;
  const ByteCount packets = (bytes + c.segment - 1) / c.segment;
  const ByteCount wire = bytes + packets * (c.MaxDatagramSize() - c.segment + o.link.overhead);
  const double seconds =
      static_cast<double>(wire) * 8 / o.link.rate.bps() + o.link.OneWayDelay().seconds();
  return static_cast<double>(bytes) * 8 / seconds;
}

void ExpectLossAccounting(const ScenarioResult& r) {
  // Every data packet the link dropped was declared lost and repaired, or was covered by
  // a tail-protection copy before it could be declared lost.
  EXPECT_GE(r.sender_total.packets_lost + r.sender_total.tail_protect_packets,
            r.forward.dropped_loss);
  EXPECT_LE(r.sender_total.packets_lost,
            r.forward.dropped_loss + r.forward.dropped_queue + r.sender_total.spurious_losses);
  EXPECT_GE(r.sender_total.packets_retransmitted + r.sender_total.tail_protect_packets,
            r.forward.dropped_loss);
}

TEST(ScenarioTest, LosslessHundredGigFillsTheLink) {
  ScenarioOptions o = Options("rate=100gbit,rtt=58ms", 2 * kGiB);
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_EQ(r.stop_reason, "done");
  EXPECT_TRUE(r.delivered_intact);
  EXPECT_EQ(r.bytes_delivered, 2 * kGiB);
  EXPECT_EQ(r.packets_lost, 0u);
  EXPECT_EQ(r.packets_retransmitted, 0u);
  EXPECT_GE(r.goodput_bps, 0.97 * IdealGoodput(o, o.bytes));
  EXPECT_LE(r.goodput_bps, 100e9);
  // Paced at the link rate: no standing queue.
  EXPECT_EQ(r.forward.dropped_queue, 0u);
  EXPECT_LT(r.forward.avg_queue_bytes, 0.01 * static_cast<double>(o.link.BdpBytes()));
}

// 2 GiB over a lossy `link`: delivered intact, more than `min_drops` packets lost by the
// link and every loss accounted for.
ScenarioResult LossyTransfer(const std::string& link, uint64_t min_drops) {
  ScenarioResult r = RunScenarioOk(Options(link, 2 * kGiB));
  EXPECT_TRUE(r.delivered_intact);
  EXPECT_GT(r.forward.dropped_loss, min_drops);
  ExpectLossAccounting(r);
  return r;
}

TEST(ScenarioTest, LightLossHundredGig) {
  ScenarioResult r = LossyTransfer("rate=100gbit,rtt=58ms,loss=1e-4", 5);
  // Selective repeat keeps the link busy; the last repairs cost about one extra RTT.
  EXPECT_GE(r.goodput_bps, 60e9);
}

TEST(ScenarioTest, HeavyLossHundredGig) {
  ScenarioResult r = LossyTransfer("rate=100gbit,rtt=58ms,loss=1e-2", 1000);
  EXPECT_GE(r.goodput_bps, 45e9);
}

TEST(ScenarioTest, ReorderDuplicationCorruption) {
  ScenarioOptions o =
      Options("rate=10gbit,rtt=58ms,reorder=1e-3,dup=1e-3,corrupt=1e-3", 512 * kMiB);
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_TRUE(r.delivered_intact);
  EXPECT_GT(r.forward.reordered, 10u);
  EXPECT_GT(r.forward.duplicated, 10u);
  EXPECT_GT(r.forward.corrupted, 10u);
  // Every corrupted datagram was rejected (checksum, or an undecodable header).
  EXPECT_EQ(r.sender_total.checksum_failures + r.sender_total.malformed_packets +
                r.receiver_total.checksum_failures + r.receiver_total.malformed_packets,
            r.forward.corrupted + r.reverse.corrupted);
  EXPECT_GT(r.receiver_total.duplicate_data_bytes, 0u);
  EXPECT_GE(r.goodput_bps, 0.7 * IdealGoodput(o, o.bytes));
}

TEST(ScenarioTest, SmallWindowLimitsToWindowPerRtt) {
  ScenarioOptions o = Options("rate=100gbit,rtt=58ms", 32 * kMiB);
  o.sender_config.window = kMiB;
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_TRUE(r.delivered_intact);
  const double window_per_rtt = static_cast<double>(kMiB) * 8 / 0.058;  // ~145 Mbit/s
  EXPECT_GE(r.goodput_bps, 0.8 * window_per_rtt);
  EXPECT_LE(r.goodput_bps, 1.1 * window_per_rtt);
}

TEST(ScenarioTest, MessageCompletionTimesNearIdeal) {
  ScenarioOptions o = Options("rate=10gbit,rtt=58ms", 0);
  o.workload = Workload::kMessages;
  o.message_size = kMiB;
  o.messages = 200;
  o.load = 0.5;
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_TRUE(r.has_message_times);
  EXPECT_EQ(r.mct.count, 200u);
  // 29 ms one way + 0.84 ms serialisation, and nothing queues at half load.
  EXPECT_NEAR(r.mct.ideal_s, 0.029 + 8.39e-4 + 1e-5, 2e-5);
  EXPECT_GE(r.mct.p50_s, 0.99 * r.mct.ideal_s);
  EXPECT_LE(r.mct.p50_s, 1.05 * r.mct.ideal_s);
  EXPECT_LE(r.mct.p99_s, 1.1 * r.mct.ideal_s);
  EXPECT_LE(r.mct.p50_s, r.mct.p99_s);
  EXPECT_LE(r.mct.p99_s, r.mct.max_s);
}

TEST(ScenarioTest, ConnectionsShareTheBottleneckFairly) {
  ScenarioOptions o = Options("rate=10gbit,rtt=58ms,loss=1e-4", 256 * kMiB);
  o.connections = 4;
  o.stagger = Duration::Milliseconds(10);
  o.sender_config.rate = Bandwidth::Gbps(2.5);
  o.receiver_config.rate = Bandwidth::Gbps(2.5);
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_EQ(r.connections.size(), 4u);
  for (const ConnectionResult& c : r.connections) {
    EXPECT_TRUE(c.delivered_intact);
    EXPECT_EQ(c.bytes_delivered, 256 * kMiB);
  }
  EXPECT_GE(r.jain_fairness, 0.98);
  EXPECT_GE(r.goodput_bps, 7e9);
}

TEST(ScenarioTest, SameSeedSameRunDifferentSeedDifferentRun) {
  ScenarioOptions o = Options("rate=10gbit,rtt=20ms,loss=1e-3,jitter=50us,reorder=1e-3", 64 * kMiB);
  ScenarioResult a = RunScenarioOk(o), b = RunScenarioOk(o);
  o.seed = 2;
  ScenarioResult c = RunScenarioOk(o);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.goodput_bps, b.goodput_bps);
  EXPECT_EQ(a.packets_sent, b.packets_sent);
  EXPECT_EQ(a.forward.dropped_loss, b.forward.dropped_loss);
  EXPECT_NE(a.trace_hash, c.trace_hash);
  EXPECT_TRUE(a.delivered_intact && c.delivered_intact);
}

TEST(ScenarioTest, StopsAtTheVirtualTimeBound) {
  ScenarioOptions o = Options("rate=1gbit,rtt=58ms", kGiB);
  o.max_virtual_time = Duration::Milliseconds(200);
  ScenarioResult r = RunScenarioOk(o);
  EXPECT_EQ(r.stop_reason, "max_virtual_time");
  EXPECT_FALSE(r.completed);
  EXPECT_FALSE(r.delivered_intact);
  EXPECT_DOUBLE_EQ(r.virtual_s, 0.2);
  EXPECT_GT(r.bytes_delivered, 0u);
  EXPECT_LT(r.bytes_delivered, kGiB);
}

// The runner reads no clock: its wall-time bound and its wall_s / cpu_s come from the
// clocks in the options, and the run itself is the same with or without them.
TEST(ScenarioTest, WallAndCpuTimeComeFromTheCallersClocks) {
  ScenarioOptions o = Options("rate=1gbit,rtt=10ms", 16 * kMiB);
  o.wall_seconds = nullptr;
  o.max_wall_time = Duration::Nanoseconds(1);  // no clock: no wall-time bound
  const ScenarioResult plain = RunScenarioOk(o);
  EXPECT_EQ(plain.stop_reason, "done");
  EXPECT_EQ(plain.wall_s, 0.0);
  EXPECT_EQ(plain.cpu_s, 0.0);
  EXPECT_EQ(plain.sim_packets_per_wall_s, 0.0);
  EXPECT_EQ(plain.sim_packets_per_cpu_s, 0.0);

  // Clocks that advance by a fixed step on every read.
  double wall = 100, cpu = 7;
  int wall_reads = 0, cpu_reads = 0;
  o.wall_seconds = [&] {
    ++wall_reads;
    return wall += 0.25;
  };
  o.cpu_seconds = [&] {
    ++cpu_reads;
    return cpu += 0.5;
  };
  o.max_wall_time = Duration::Seconds(600);
  const ScenarioResult timed = RunScenarioOk(o);
  EXPECT_EQ(timed.stop_reason, "done");
  EXPECT_EQ(timed.trace_hash, plain.trace_hash);
  EXPECT_EQ(timed.bytes_delivered, plain.bytes_delivered);
  EXPECT_EQ(cpu_reads, 2);
  EXPECT_DOUBLE_EQ(timed.cpu_s, 0.5);
  EXPECT_GE(wall_reads, 3);  // start and end of the run, and the simulator's own bound
  EXPECT_DOUBLE_EQ(timed.wall_s, 0.25 * (wall_reads - 1));
  EXPECT_DOUBLE_EQ(timed.sim_packets_per_cpu_s, timed.sim_packets / 0.5);

  // A bound the clock passes stops the run.
  o.max_wall_time = Duration::Milliseconds(100);
  const ScenarioResult stopped = RunScenarioOk(o);
  EXPECT_EQ(stopped.stop_reason, "max_wall_time");
  EXPECT_FALSE(stopped.completed);
}

TEST(ScenarioTest, RejectsBadOptions) {
  ScenarioOptions o = Options("rate=1gbit,rtt=58ms", kMiB);
  o.connections = 0;
  EXPECT_EQ(RunScenario(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options("rate=1gbit,rtt=58ms", kMiB);
  o.sender_config.window = 1;
  EXPECT_EQ(RunScenario(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options("rate=1gbit,rtt=58ms", 0);
  EXPECT_EQ(RunScenario(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace longhaul::sim
