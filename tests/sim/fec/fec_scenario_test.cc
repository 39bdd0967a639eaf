// FEC scenarios through real Connections over the simulated link (tier `sim`).
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tests/sim/link_defaults.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kMiB = ByteCount{1} << 20;

ScenarioOptions Messages(const std::string& link, FecMode fec, ByteCount size, uint64_t count) {
  ScenarioOptions o = LinkDefaults(link);
  o.sender_config.fec = o.receiver_config.fec = fec;
  o.workload = Workload::kMessages;
  o.message_size = size;
  o.messages = count;
  o.load = 0.5;
  return o;
}

ScenarioResult RunOk(const ScenarioOptions& o) {
  absl::StatusOr<ScenarioResult> r = RunScenario(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScenarioResult{};
}

TEST(FecScenarioTest, FixedFecRepairsWithoutRetransmissionAt1e3) {
  ScenarioOptions o = Messages("rate=100gbit,rtt=58ms,loss=1e-3", FecMode::kFixed, 4 * kMiB, 600);
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  EXPECT_GT(r.receiver_total.fec_recovered_packets, 50u);
  // Near zero: only blocks that lost more than m packets (rare at 1e-3 with m = 4).
  EXPECT_LE(r.packets_retransmitted, r.forward.dropped_loss / 20);
  ASSERT_TRUE(r.has_message_times);
  EXPECT_LE(r.mct.p99_s, 1.15 * r.mct.ideal_s);
}

TEST(FecScenarioTest, AutoFecKeepsTailCompletionNearIdealAt1e3) {
  ScenarioOptions o = Messages("rate=100gbit,rtt=58ms,loss=1e-3", FecMode::kAuto, 4 * kMiB, 1000);
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_TRUE(r.has_message_times);
  EXPECT_LE(r.mct.p999_s, 1.15 * r.mct.ideal_s);
  EXPECT_LE(r.mct.mean_s, 1.05 * r.mct.ideal_s);
  EXPECT_EQ(r.receiver_total.fec_blocks_unrecoverable, 0u);
}

TEST(FecScenarioTest, WithoutFecTheTailPaysARoundTrip) {
  ScenarioOptions o = Messages("rate=100gbit,rtt=58ms,loss=1e-3", FecMode::kOff, 4 * kMiB, 1000);
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_TRUE(r.has_message_times);
  // A 4 MiB message (~470 packets) loses one at 1e-3 with probability ~0.37: the p99
  // message waits for at least one repair round trip.
  EXPECT_GE(r.mct.p99_s, r.mct.ideal_s + 0.9 * 0.058);
}

TEST(FecScenarioTest, AutoFecWithInterleavingHandlesBurstyLoss) {
  ScenarioOptions o =
      Messages("rate=100gbit,rtt=58ms,loss=1e-3,burst=8", FecMode::kAuto, 4 * kMiB, 1000);
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_TRUE(r.has_message_times);
  EXPECT_LE(r.mct.p999_s, 1.3 * r.mct.ideal_s);
}

TEST(FecScenarioTest, AutoFecTurnsOffOnACleanLinkOnceEnoughPacketsShowIt) {
  // A clean run of n packets bounds the loss rate only by ~3/n, and with nothing seen the
  // bursts are assumed as long as the starting interleave: parity stays, shrinking, until
  // the bound falls below the policy's loss floor (1e-6, ~3 M packets), then FEC is off.
  ScenarioOptions o = Messages("rate=10gbit,rtt=58ms", FecMode::kAuto, 4 * kMiB, 8000);
  o.payload = false;  // 3.8 M data packets
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_EQ(r.connections.size(), 1u);
  const ConnectionDebugState& d = r.connections[0].sender_state;
  EXPECT_STREQ(d.fec_reason, "clean-link");
  EXPECT_EQ(d.fec_m, 0u);
  EXPECT_LT(static_cast<double>(r.sender_total.fec_overhead_bytes),
            0.1 * static_cast<double>(r.bytes_delivered));
  EXPECT_LE(r.mct.p999_s, 1.05 * r.mct.ideal_s);
}

}  // namespace
}  // namespace longhaul::sim

namespace longhaul::sim {
namespace {

// Cells of the FEC grid (tools/bench/fec-grid, docs/fec.md section 10) where auto FEC
// once failed the tail targets, run as docs/fec.md runs them: payload-free, a window of
// at least 2 x BDP + 2 messages, 1000 messages at half load.
struct TailCell {
  const char* link;
  ByteCount size;
};

class FecTailTest : public ::testing::TestWithParam<TailCell> {};

TEST_P(FecTailTest, AutoFecKeepsP999Within15AndTheMeanWithin5PercentOfIdeal) {
  const TailCell& cell = GetParam();
  ScenarioOptions o = Messages(cell.link, FecMode::kAuto, cell.size, 1000);
  o.payload = false;
  const double bdp = o.link.rate.bps() * o.link.rtt.seconds() / 8;
  o.sender_config.window = std::max<ByteCount>(ByteCount{1} << 30,
                                               static_cast<ByteCount>(2 * bdp) + 2 * cell.size);
  o.sender_config.recv_window = 2 * o.sender_config.window;
  o.receiver_config = o.sender_config;
  o.max_virtual_time = Duration::Seconds(3000);
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact) << r.error;
  ASSERT_TRUE(r.has_message_times);
  EXPECT_LE(r.mct.p999_s, 1.15 * r.mct.ideal_s) << "p99.9 " << r.mct.p999_s / r.mct.ideal_s;
  EXPECT_LE(r.mct.mean_s, 1.05 * r.mct.ideal_s) << "mean " << r.mct.mean_s / r.mct.ideal_s;
}

INSTANTIATE_TEST_SUITE_P(
    GridCells, FecTailTest,
    ::testing::Values(
        // Rare bursts: a short loss window saw none and turned FEC off (p99.9 4.1 x).
        TailCell{"rate=10gbit,rtt=58ms,loss=1e-3,burst=8", 16 * kMiB},
        // Frequent small messages: one repair holds ~50 messages back (p99 2.4 x).
        TailCell{"rate=10gbit,rtt=58ms,loss=1e-4,burst=4", kMiB},
        // Target from the percentile: 1e-3 repairs per message was too loose (2.3 x).
        TailCell{"rate=10gbit,rtt=58ms,loss=1e-3", 16 * kMiB},
        // Large messages on a short round trip: retransmission is the cheaper repair.
        TailCell{"rate=1gbit,rtt=10ms,loss=1e-3,burst=4", 64 * kMiB},
        // The first round trip (~20 messages at 100 Gbit/s) goes out before any loss
        // report: under the configured 32, 4, 8 it lost blocks (p99.9 2.8 x).
        TailCell{"rate=100gbit,rtt=58ms,loss=1e-2,burst=8", 16 * kMiB},
        // Messages many round trips long: a repair was counted as 3 RTTs for any loss in
        // the message, which called for 6-16 % parity that every message paid in time
        // (p99.9 1.19 x and 1.18 x); only a loss in the last round trip costs, one RTT.
        TailCell{"rate=1gbit,rtt=10ms,loss=1e-4", 16 * kMiB},
        TailCell{"rate=1gbit,rtt=58ms,loss=1e-3,burst=8", 64 * kMiB}));

TEST(FecScenarioTest, WhereParityCannotServeTheDebugStateSaysSo) {
  // 1 MiB messages at half of 10 Gbit/s over 58 ms in bursts of 8 at 1e-2: no code within
  // 25 % parity meets the target for ~50 messages per RTT.
  ScenarioOptions o = Messages("rate=10gbit,rtt=58ms,loss=1e-2,burst=8", FecMode::kAuto, kMiB, 300);
  o.payload = false;
  ScenarioResult r = RunOk(o);
  EXPECT_TRUE(r.delivered_intact);
  ASSERT_EQ(r.connections.size(), 1u);
  const ConnectionDebugState& d = r.connections[0].sender_state;
  EXPECT_STREQ(d.fec_reason, "best-effort");
  EXPECT_GT(d.fec_m, 0u);
  EXPECT_LE(static_cast<double>(r.sender_total.fec_overhead_bytes),
            0.27 * static_cast<double>(r.bytes_delivered));  // fec_max_overhead 0.25
}

}  // namespace
}  // namespace longhaul::sim
