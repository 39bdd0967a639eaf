// The payload-free mode (ScenarioOptions::payload = false) against the payload mode on the
// same seeded scenarios: the same protocol run (goodput, completion times, packet and
// drop counts within 0.5 %), delivery still checked, at a fraction of the memory traffic.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "tests/sim/link_defaults.h"
#include "transport/sim/scenario.h"

namespace longhaul::sim {
namespace {

constexpr ByteCount kMiB = ByteCount{1} << 20;

ScenarioOptions Options(const std::string& link) {
  ScenarioOptions o = LinkDefaults(link);
  o.max_virtual_time = Duration::Seconds(120);
  return o;
}

void ExpectClose(double with_payload, double without, const char* what) {
  EXPECT_LE(std::abs(without - with_payload), 0.005 * std::abs(with_payload))
      << what << ": payload " << with_payload << ", payload-free " << without;
}

// Runs `o` both ways and compares what the protocol did.
void ExpectSameRun(ScenarioOptions o) {
  o.payload = true;
  absl::StatusOr<ScenarioResult> a = RunScenario(o);
  o.payload = false;
  absl::StatusOr<ScenarioResult> b = RunScenario(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(a->delivered_intact) << a->error;
  EXPECT_TRUE(b->delivered_intact) << b->error;
  EXPECT_EQ(a->bytes_delivered, b->bytes_delivered);
  ExpectClose(a->goodput_bps, b->goodput_bps, "goodput");
  ExpectClose(static_cast<double>(a->packets_sent), static_cast<double>(b->packets_sent),
              "packets sent");
  ExpectClose(static_cast<double>(a->forward.offered_bytes),
              static_cast<double>(b->forward.offered_bytes), "bytes offered to the link");
  ExpectClose(static_cast<double>(a->forward.dropped_loss + a->forward.dropped_queue),
              static_cast<double>(b->forward.dropped_loss + b->forward.dropped_queue),
              "link drops");
  ExpectClose(static_cast<double>(a->sender_total.fec_repair_packets_sent),
              static_cast<double>(b->sender_total.fec_repair_packets_sent), "repair packets");
  if (a->has_message_times) {
    ExpectClose(a->mct.mean_s, b->mct.mean_s, "MCT mean");
    ExpectClose(a->mct.p99_s, b->mct.p99_s, "MCT p99");
  }
  for (size_t i = 0; i < a->connections.size() && i < b->connections.size(); ++i) {
    ExpectClose(a->connections[i].goodput_bps, b->connections[i].goodput_bps,
                "a connection's goodput");
  }
  // Short datagrams: the payload-free run moved a small fraction of the bytes.
  EXPECT_LT(b->sim.pool_buffers * 256, a->sim.pool_buffers * 9000 / 4);
}

TEST(PayloadFreeTest, BulkThroughRandomLossMatchesThePayloadRun) {
  ScenarioOptions o = Options("rate=10gbit,rtt=58ms,loss=1e-3");
  o.bytes = 512 * kMiB;
  ExpectSameRun(o);
}

TEST(PayloadFreeTest, MessagesWithAutoFecOnABurstyLinkMatchThePayloadRun) {
  ScenarioOptions o = Options("rate=10gbit,rtt=58ms,loss=1e-3,burst=4");
  o.sender_config.fec = o.receiver_config.fec = FecMode::kAuto;
  o.workload = Workload::kMessages;
  o.message_size = 4 * kMiB;
  o.messages = 150;
  ExpectSameRun(o);
}

TEST(PayloadFreeTest, BbrConnectionsWithReorderingDuplicatesAndCorruptionMatch) {
  ScenarioOptions o = Options("rate=10gbit,rtt=30ms,loss=1e-4,reorder=1e-3,dup=1e-3,corrupt=1e-3");
  o.sender_config.cc = o.receiver_config.cc = CongestionControl::kBbr;
  o.sender_config.rate = o.receiver_config.rate = Bandwidth::Zero();
  o.connections = 3;
  o.stagger = Duration::Milliseconds(200);
  o.bytes = 128 * kMiB;
  ExpectSameRun(o);
}

TEST(PayloadFreeTest, SmallMessagesSharingPacketsMatch) {
  ScenarioOptions o = Options("rate=1gbit,rtt=20ms,loss=1e-3");
  o.workload = Workload::kMessages;
  o.message_size = 700;
  o.messages = 20000;
  ExpectSameRun(o);
}

}  // namespace
}  // namespace longhaul::sim
