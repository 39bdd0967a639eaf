// The analytic model (tuner/model) against the simulator: real Connections over the
// link model (RunScenario), small enough runs to keep the test quick.
//
// Tolerances (docs/tuning.md, "Model accuracy"):
//  * bulk goodput within 3 % where the rate or the window binds (5 % where receive-window
//    stalls behind repairs bind: the stall is a renewal approximation):
//    the model's terms (headers, retransmissions, flight residence) are exact to well
//    under 1 %; what it does not capture is the transient of the first RTT and the
//    exact placement of losses in the tail, which on these short transfers (10-40
//    RTTs) is worth up to ~2 %;
//  * message completion time: p99 within 15 % (or 1 ms), mean within 15 %: the p99 of
//    1000 messages is the 10th largest, so one repair more or less among them moves it
//    by a whole repair delay; the model is a mixture over independent loss events.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "transport/base/clock.h"
#include "transport/base/parse.h"
#include "transport/profile/profile.h"
#include "transport/sim/link_spec.h"
#include "transport/sim/scenario.h"
#include "tuner/model/link_estimate.h"
#include "tuner/model/transport_model.h"
#include "tuner/model/uc_chunk.h"

namespace longhaul::tuner {
namespace {

struct BulkCase {
  const char* link;
  const char* window;       // "" = default
  const char* recv_window;  // "" = default
  bool tail_protect;
  const char* bytes;
  const char* fec = "off";  // profile form: off | K,M
  uint32_t interleave = 1;
  const char* fec_flush = "";  // "" = default
};

TransportConfig ConfigFor(const sim::LinkSpec& link, const char* window, const char* recv_window,
                          bool tail_protect, const char* fec = "off", uint32_t interleave = 1,
                          const char* fec_flush = "") {
  TransportConfig c;
  EXPECT_TRUE(ApplyProfileKey(&c, "fec", fec).ok());
  c.fec_interleave = interleave;
  if (*fec_flush) c.fec_flush = *ParseDuration(fec_flush);
  c.rate = link.rate;
  c.segment = TransportConfig::SegmentForMtu(link.mtu);
  if (*window) c.window = *ParseByteCount(window);
  if (*recv_window) c.recv_window = *ParseByteCount(recv_window);
  c.tail_protect = tail_protect;
  return c;
}

// A simulated transfer on `link` with `config` at both ends, bounded by the scenario's
// wall-time limit.
sim::ScenarioOptions ScenarioOn(const sim::LinkSpec& link, const TransportConfig& config) {
  sim::ScenarioOptions opt;
  opt.wall_seconds = MonotonicSeconds;  // the scenario's wall-time bound applies
  opt.link = link;
  opt.sender_config = opt.receiver_config = config;
  return opt;
}

TEST(ModelTest, BulkGoodputMatchesTheSimulator) {
  const std::vector<BulkCase> cases = {
      {"rate=1gbit,rtt=58ms", "", "", true, "128MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "", "", true, "128MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-2", "", "", true, "128MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-2,burst=8", "", "", false, "128MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "1MiB", "", true, "16MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "4MiB", "", true, "32MiB"},
      {"rate=2gbit,rtt=20ms,loss=1e-3,mtu=1500", "", "", true, "128MiB"},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "", "8MiB", true, "64MiB"},
      {"rate=1gbit,rtt=100ms,jitter=1ms,loss=1e-4", "", "", true, "128MiB"},
      {"rate=5gbit,rtt=10ms,loss=5e-3,burst=4", "", "", true, "256MiB"},
      // FEC: full blocks, blocks closed after every packet on a path slower than the
      // flush deadline, interleaving, and a receive window that FEC keeps from stalling.
      {"rate=1gbit,rtt=58ms,loss=1e-3", "", "", true, "128MiB", "32,4", 1, "5ms"},
      {"rate=100mbit,rtt=58ms,loss=1e-3", "", "", true, "16MiB", "32,4", 1, "500us"},
      {"rate=2gbit,rtt=20ms,loss=1e-2,burst=4", "", "", true, "128MiB", "32,4", 8, "20ms"},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "", "8MiB", true, "64MiB", "16,2", 1, "5ms"},
  };
  for (const BulkCase& tc : cases) {
    SCOPED_TRACE(absl::StrFormat("%s window=%s recv_window=%s tail_protect=%d", tc.link, tc.window,
                                 tc.recv_window, tc.tail_protect));
    absl::StatusOr<sim::LinkSpec> link = sim::ParseLinkSpec(tc.link, {});
    ASSERT_TRUE(link.ok()) << link.status();
    sim::ScenarioOptions opt = ScenarioOn(*link, ConfigFor(*link, tc.window, tc.recv_window,
                                                           tc.tail_protect, tc.fec, tc.interleave,
                                                           tc.fec_flush));
    opt.bytes = *ParseByteCount(tc.bytes);
    // The model gives the expected transfer time; one run's tail holds a repair or not,
    // so average the transfer time over a few seeds.
    double transfer_s = 0;
    constexpr int kSeeds = 4;
    for (int seed = 1; seed <= kSeeds; ++seed) {
      opt.seed = seed;
      absl::StatusOr<sim::ScenarioResult> r = sim::RunScenario(opt);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->delivered_intact) << r->error;
      transfer_s += r->transfer_s / kSeeds;
    }
    const double sim_goodput = static_cast<double>(opt.bytes) * 8 / transfer_s;
    Workload wl;
    wl.bulk_bytes = opt.bytes;
    Prediction pr = Predict(LinkEstimate::FromLinkSpec(*link), opt.sender_config, wl);
    const double rel = pr.goodput_bps / sim_goodput - 1;
    std::printf("%-40s w=%-5s rw=%-5s tp=%d fec=%s/%d  sim %.4f  model %.4f Gbit/s (%+.2f%%)  %s tail %.1fms\n",
                tc.link, tc.window, tc.recv_window, tc.tail_protect, tc.fec, tc.interleave, sim_goodput / 1e9,
                pr.goodput_bps / 1e9, 100 * rel, pr.limit.c_str(), pr.tail_s * 1e3);
    // The receive-window stall is a renewal approximation: 5 %.
    const double tol = pr.limit == "receive window" ? 0.05 : 0.03;
    EXPECT_NEAR(pr.goodput_bps, sim_goodput, tol * sim_goodput);
  }
}

struct MctCase {
  const char* link;
  const char* message_size;
  bool tail_protect;
  double load;
  const char* fec = "off";
  uint32_t interleave = 1;
  const char* fec_flush = "";
};

TEST(ModelTest, MessageCompletionTimeMatchesTheSimulator) {
  const std::vector<MctCase> cases = {
      {"rate=1gbit,rtt=58ms", "1MiB", true, 0.5},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "1MiB", false, 0.5},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "1MiB", true, 0.5},
      {"rate=1gbit,rtt=20ms,loss=1e-3", "4MiB", true, 0.8},
      {"rate=1gbit,rtt=58ms,loss=1e-4", "256KiB", false, 0.5},
      {"rate=1gbit,rtt=20ms,loss=1e-2", "64KiB", true, 0.3},
      {"rate=1gbit,rtt=20ms,loss=1e-2", "64KiB", false, 0.3},
      {"rate=1gbit,rtt=20ms,loss=1e-3", "64KiB", false, 0.3},
      {"rate=1gbit,rtt=20ms,loss=1e-3", "4MiB", false, 0.8},
      {"rate=1gbit,rtt=58ms,loss=1e-3", "1MiB", false, 0.5, "32,4"},
      {"rate=1gbit,rtt=20ms,loss=1e-2", "64KiB", false, 0.3, "8,2"},
      {"rate=2gbit,rtt=20ms,loss=1e-2,burst=4", "4MiB", false, 0.5, "32,4", 4, "10ms"},
  };
  for (const MctCase& tc : cases) {
    SCOPED_TRACE(absl::StrFormat("%s size=%s tail_protect=%d load=%.1f", tc.link, tc.message_size,
                                 tc.tail_protect, tc.load));
    absl::StatusOr<sim::LinkSpec> link = sim::ParseLinkSpec(tc.link, {});
    ASSERT_TRUE(link.ok()) << link.status();
    sim::ScenarioOptions opt = ScenarioOn(
        *link, ConfigFor(*link, "", "", tc.tail_protect, tc.fec, tc.interleave, tc.fec_flush));
    opt.workload = sim::Workload::kMessages;
    opt.message_size = *ParseByteCount(tc.message_size);
    opt.messages = 1000;
    opt.load = tc.load;
    opt.seed = 5;
    absl::StatusOr<sim::ScenarioResult> r = sim::RunScenario(opt);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->delivered_intact) << r->error;
    Workload wl;
    wl.objective = Objective::kMct;
    wl.message_size = opt.message_size;
    wl.load = tc.load;
    wl.messages = opt.messages;
    Prediction pr = Predict(LinkEstimate::FromLinkSpec(*link), opt.sender_config, wl);
    std::printf("%-36s %-6s tp=%d fec=%s load=%.1f  sim ideal %.2f mean %.2f p99 %.2f | model ideal %.2f "
                "mean %.2f p99 %.2f ms  P(repair) %.3f\n",
                tc.link, tc.message_size, tc.tail_protect, tc.fec, tc.load, r->mct.ideal_s * 1e3,
                r->mct.mean_s * 1e3, r->mct.p99_s * 1e3, pr.mct_ideal_s * 1e3, pr.mct_mean_s * 1e3,
                pr.mct_p99_s * 1e3, pr.p_message_repair);
    EXPECT_NEAR(pr.mct_ideal_s, r->mct.ideal_s, 1e-6 + 1e-4 * r->mct.ideal_s);
    EXPECT_NEAR(pr.mct_p99_s, r->mct.p99_s, std::max(1e-3, 0.15 * r->mct.p99_s));
    EXPECT_NEAR(pr.mct_mean_s, r->mct.mean_s, std::max(1e-3, 0.15 * r->mct.mean_s));
  }
}

// The UC datapath's chunk (docs/rdma.md 7.7): the largest power-of-two chunk whose
// expected loss stays within 2 %; bursts let chunks grow (a burst costs one chunk).
TEST(UcChunk, TheLargestChunkWithinTheLossBudget) {
  EXPECT_DOUBLE_EQ(UcChunkLoss(0, 1, 16), 0.0);
  EXPECT_NEAR(UcChunkLoss(1e-3, 1, 16), 1 - std::pow(1 - 1e-3, 16), 1e-12);
  EXPECT_NEAR(UcChunkLoss(1e-2, 4, 4), 1 - std::pow(1 - 2.5e-3, 7), 1e-12);
  auto packets = [](double loss, double burst) {
    LinkEstimate l;
    l.loss = loss;
    l.mean_burst = burst;
    return AdviseUcChunk(l);
  };
  EXPECT_EQ(packets(0, 1).packets, kMaxUcChunkPackets);
  EXPECT_EQ(packets(1e-4, 1).packets, 16u);
  const UcChunkAdvice at_1e3 = packets(1e-3, 1);
  EXPECT_EQ(at_1e3.packets, 16u);  // 1.6 % of chunks
  EXPECT_NEAR(at_1e3.chunk_loss, 0.0159, 1e-4);
  EXPECT_NE(at_1e3.why.find("16 packets"), std::string::npos) << at_1e3.why;
  EXPECT_EQ(packets(1e-2, 1).packets, 2u);  // 2 % at 2 packets, 3.9 % at 4
  EXPECT_EQ(packets(1e-2, 4).packets, 4u);  // bursts of 4: 1.7 % at 4 packets
  EXPECT_EQ(packets(5e-2, 1).packets, 1u);  // nothing fits: one packet, its own loss
  EXPECT_NEAR(packets(5e-2, 1).chunk_loss, 0.05, 1e-12);
  for (double loss : {0.0, 1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2}) {
    const UcChunkAdvice a = packets(loss, 1);
    EXPECT_TRUE(a.packets == 1 || a.chunk_loss <= a.budget) << loss;
    if (a.packets < kMaxUcChunkPackets) {
      EXPECT_GT(UcChunkLoss(loss, 1, 2 * a.packets), a.budget) << loss;  // the largest
    }
  }
}

}  // namespace
}  // namespace longhaul::tuner
