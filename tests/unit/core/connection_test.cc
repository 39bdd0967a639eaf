// Protocol tests of the sans-IO Connection over the deterministic ConnectionPair pipe.
#include "transport/core/connection.h"

#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_config.h"
#include "tests/support/wire_packets.h"
#include "transport/base/rng.h"
#include "transport/testing/connection_pair.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

using testing::ConnectionPair;
using testing::FilterVerdict;
using testing::IsDataPacket;
using testing::Pattern;
using testing::PipeOptions;
using testing::PipeTestConfig;

size_t Count(const std::vector<Event>& ev, Event::Type t) {
  size_t n = 0;
  for (const auto& e : ev) n += e.type == t;
  return n;
}

// Sends `sizes` from a to b (owned receive memory) and checks every byte and the order.
void SendAndVerify(ConnectionPair& p, const std::vector<size_t>& sizes, Duration limit) {
  std::vector<std::vector<uint8_t>> messages;
  for (size_t i = 0; i < sizes.size(); ++i) {
    messages.push_back(Pattern(sizes[i], i + 7));
    auto& m = messages.back();
    auto id = p.a().Send(SendBuffer{m.data(), m.size()}, 100 + i);
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, i);
  }
  bool ok = p.RunUntil(
      [&] {
        return Count(p.b_events(), Event::Type::kReceiveComplete) == sizes.size() &&
               Count(p.a_events(), Event::Type::kSendComplete) == sizes.size();
      },
      limit);
  ASSERT_TRUE(ok) << "received " << Count(p.b_events(), Event::Type::kReceiveComplete)
                  << " sent-complete " << Count(p.a_events(), Event::Type::kSendComplete);
  size_t r = 0, s = 0;
  for (auto& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_TRUE(e.status.ok()) << e.status;
    EXPECT_EQ(e.message_id, r);
    ASSERT_EQ(e.size, sizes[r]);
    if (e.size > 0) {
      ASSERT_NE(e.data, nullptr);
      EXPECT_EQ(0, std::memcmp(e.data, messages[r].data(), e.size)) << "message " << r;
    }
    ++r;
  }
  for (auto& e : p.a_events()) {
    if (e.type != Event::Type::kSendComplete) continue;
    EXPECT_TRUE(e.status.ok());
    EXPECT_EQ(e.message_id, s);
    EXPECT_EQ(e.tag, 100 + s);
    ++s;
  }
}

// Filters a's data packets (originals and repairs alike, numbered from 0 in the order they
// leave a): `verdict(i, v)` decides the i-th; every other datagram passes untouched.
void FilterDataPackets(ConnectionPair& p,
                       std::function<void(uint64_t, FilterVerdict&)> verdict) {
  p.set_filter([seen = uint64_t{0}, verdict = std::move(verdict)](
                   int dir, uint64_t, const std::vector<uint8_t>& d) mutable {
    FilterVerdict v;
    if (dir == 0 && IsDataPacket(d)) verdict(seen++, v);
    return v;
  });
}

// Drops a's data packets whose index (as in FilterDataPackets) satisfies `drop`.
void DropDataPackets(ConnectionPair& p, std::function<bool(uint64_t)> drop) {
  FilterDataPackets(p, [drop = std::move(drop)](uint64_t i, FilterVerdict& v) { v.drop = drop(i); });
}

// Holds back a's data packets whose index satisfies `hold` by `delay`.
void DelayDataPackets(ConnectionPair& p, std::function<bool(uint64_t)> hold, Duration delay) {
  FilterDataPackets(p, [hold = std::move(hold), delay](uint64_t i, FilterVerdict& v) {
    if (hold(i)) v.extra_delay = delay;
  });
}

// Drops each datagram travelling in `dir` (0: a to b, 1: b to a, -1: both) with probability
// `loss`, drawn from Rng(seed).
void DropRandomly(ConnectionPair& p, int dir, double loss, uint64_t seed) {
  p.set_filter([dir, loss, rng = Rng(seed)](int d, uint64_t, const std::vector<uint8_t>&) mutable {
    FilterVerdict v;
    v.drop = (dir < 0 || d == dir) && rng.Bernoulli(loss);
    return v;
  });
}

// Drops every datagram travelling in `dir` (-1: both directions).
void DropAll(ConnectionPair& p, int dir) {
  p.set_filter([dir](int d, uint64_t, const std::vector<uint8_t>&) {
    FilterVerdict v;
    v.drop = dir < 0 || d == dir;
    return v;
  });
}

TEST(ConnectionTest, DeliversMessagesOfManySizesInOrder) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  SendAndVerify(p, {1, 0, 999, 1000, 1001, 5000, 0, 123457, 3}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().packets_lost, 0u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
  EXPECT_EQ(p.b().stats().duplicate_data_bytes, 0u);
}

TEST(ConnectionTest, SmallMessagesShareAPacket) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  std::vector<size_t> sizes(50, 10);
  SendAndVerify(p, sizes, Duration::Seconds(5));
  EXPECT_LT(p.a().stats().data_packets_sent, 5u);
}

TEST(ConnectionTest, RepairsADroppedPacketBySelectiveRepeat) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  DropDataPackets(p, [](uint64_t i) { return i == 20; });
  SendAndVerify(p, {200000}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().packets_lost, 1u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 1u);
  EXPECT_EQ(p.a().stats().spurious_losses, 0u);
  // Only the lost segment was resent.
  EXPECT_EQ(p.a().stats().data_bytes_retransmitted, 1000u);
}

TEST(ConnectionTest, TailLossIsRepairedByProbeTimeout) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  // 10 data packets; drop the last two first transmissions.
  DropDataPackets(p, [](uint64_t i) { return i == 8 || i == 9; });
  SendAndVerify(p, {10000}, Duration::Seconds(10));
  EXPECT_GE(p.a().stats().pto_count, 1u);
  EXPECT_GE(p.a().stats().packets_retransmitted, 2u);
}

TEST(ConnectionTest, TailProtectionRepairsTailLossWithoutProbeTimeout) {
  TransportConfig c = PipeTestConfig();
  c.tail_protect = true;
  ConnectionPair p(c, c);
  DropDataPackets(p, [](uint64_t i) { return i == 8 || i == 9; });  // the last two originals
  const Time start = p.now();
  SendAndVerify(p, {10000}, Duration::Seconds(10));
  EXPECT_EQ(p.a().stats().pto_count, 0u);
  EXPECT_GE(p.a().stats().tail_protect_packets, 2u);
  // Done within about one RTT (20 ms) plus serialisation, not RTT + probe timeout.
  EXPECT_LT(p.now() - start, Duration::Milliseconds(25));
}

TEST(ConnectionTest, TailProtectionCopiesFitBehindAPiggybackedAck) {
  // a's originals carry no ACK (nothing to acknowledge yet); b's message reaches a while
  // a is sending tail copies, so the copies carry an ACK in front of the data and must
  // shrink to the room left.
  TransportConfig c = PipeTestConfig();
  c.tail_protect = true;
  ConnectionPair p(c, c);
  auto a_msg = Pattern(1000000, 1), b_msg = Pattern(30000, 2);
  // Gaps in b's packets give a's ACKs several ranges (a larger ACK frame).
  uint64_t b_data = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir == 1 && IsDataPacket(d)) {
      uint64_t i = b_data++;
      v.drop = i < 30 && i % 2 == 1;
    }
    return v;
  });
  const Time start = p.now();
  ASSERT_TRUE(p.a().Send(SendBuffer{a_msg.data(), a_msg.size()}, 1).ok());
  p.RunUntil([&] { return p.now() >= start + Duration::Milliseconds(1); }, Duration::Seconds(1));
  ASSERT_TRUE(p.b().Send(SendBuffer{b_msg.data(), b_msg.size()}, 2).ok());
  ASSERT_TRUE(p.RunUntil(
      [&] {
        return Count(p.a_events(), Event::Type::kReceiveComplete) == 1 &&
               Count(p.b_events(), Event::Type::kReceiveComplete) == 1;
      },
      Duration::Seconds(5)));
  EXPECT_GT(p.a().stats().tail_protect_packets, 0u);
  EXPECT_EQ(0, std::memcmp(p.b_events()[0].data, a_msg.data(), a_msg.size()));
  EXPECT_EQ(0, std::memcmp(p.a_events()[0].data, b_msg.data(), b_msg.size()));
}

TEST(ConnectionTest, TailProtectionCopiesOnlyRecentPacketsOnce) {
  TransportConfig c = PipeTestConfig();
  c.tail_protect = true;
  ConnectionPair p(c, c);
  SendAndVerify(p, {1000000}, Duration::Seconds(10));
  // 1000 packets take 8 ms at 1 Gbit/s; the RTT is 20 ms, so all are recent, but none is
  // copied twice and copies only fill idle time after the last original.
  EXPECT_LE(p.a().stats().tail_protect_packets, 1000u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
  EXPECT_EQ(p.b().stats().data_bytes_received, 1000000u);
}

TransportConfig FecConfig(uint32_t k, uint32_t m, uint32_t d) {
  TransportConfig c = PipeTestConfig();
  c.fec = FecMode::kFixed;
  c.fec_k = k;
  c.fec_m = m;
  c.fec_interleave = d;
  return c;
}

TEST(ConnectionTest, FecRebuildsLostPacketsWithoutRetransmission) {
  TransportConfig c = FecConfig(8, 2, 1);
  ConnectionPair p(c, c);
  // Lose one or two packets in several blocks (each block: 8 data + 2 repair packets).
  DropDataPackets(p, [](uint64_t i) { return i == 3 || i == 17 || i == 18 || i == 40; });
  SendAndVerify(p, {200000, 5, 0}, Duration::Seconds(5));
  EXPECT_EQ(p.b().stats().fec_recovered_packets, 4u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
  EXPECT_EQ(p.a().stats().packets_lost, 0u);  // rebuilt packets are acknowledged
  EXPECT_GT(p.a().stats().fec_repair_packets_sent, 0u);
  EXPECT_GT(p.a().stats().fec_overhead_bytes, 0u);
}

TEST(ConnectionTest, FecBlockWithTooManyLossesFallsBackToSelectiveRepeat) {
  TransportConfig c = FecConfig(8, 2, 1);
  ConnectionPair p(c, c);
  // Three losses in the first block (m = 2): unrecoverable; exactly those are resent.
  DropDataPackets(p, [](uint64_t i) { return i == 1 || i == 2 || i == 5; });
  SendAndVerify(p, {100000}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().packets_retransmitted, 3u);
  EXPECT_EQ(p.b().stats().fec_recovered_packets, 0u);
  // The receiver gives the block up once it is several RTTs old (keepalives keep the
  // pair running meanwhile).
  p.RunUntil([&] { return p.b().stats().fec_blocks_unrecoverable > 0; }, Duration::Seconds(10));
  EXPECT_EQ(p.b().stats().fec_blocks_unrecoverable, 1u);
}

TEST(ConnectionTest, FecInterleavingSpreadsABurst) {
  // A burst of 6 consecutive packets: with depth 4 each block loses at most 2 (= m).
  TransportConfig c = FecConfig(8, 2, 4);
  ConnectionPair p(c, c);
  DropDataPackets(p, [](uint64_t i) { return i >= 10 && i < 16; });
  SendAndVerify(p, {300000}, Duration::Seconds(5));
  EXPECT_EQ(p.b().stats().fec_recovered_packets, 6u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
}

TEST(ConnectionTest, FecShortensTheLastBlockOfAMessage) {
  // 3 packets of data then idle: the block closes with k' = 3 and its parity goes out at
  // once; losing one packet is repaired by FEC, not by a timeout.
  TransportConfig c = FecConfig(32, 2, 1);
  ConnectionPair p(c, c);
  DropDataPackets(p, [](uint64_t i) { return i == 2; });
  auto m = Pattern(2500, 1);
  ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), m.size()}, 0).ok());
  // Received within the one-way delay (10 ms) plus a little: no repair round trip.
  ASSERT_TRUE(p.RunUntil([&] { return Count(p.b_events(), Event::Type::kReceiveComplete) == 1; },
                         Duration::Milliseconds(11)));
  EXPECT_EQ(0, std::memcmp(p.b_events()[0].data, m.data(), m.size()));
  EXPECT_EQ(p.b().stats().fec_recovered_packets, 1u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
  EXPECT_EQ(p.a().stats().fec_repair_packets_sent, 2u);
}

// Sends `rounds` messages of `size`, one at a time (each waits for the previous one's
// delivery, so the sender is never backlogged), verifying each.
void SendRounds(ConnectionPair& p, int rounds, size_t size) {
  auto m = Pattern(size, 3);
  for (int round = 0; round < rounds; ++round) {
    const size_t before = Count(p.b_events(), Event::Type::kReceiveComplete);
    ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), m.size()}, 0).ok());
    ASSERT_TRUE(p.RunUntil(
        [&] { return Count(p.b_events(), Event::Type::kReceiveComplete) == before + 1; },
        Duration::Seconds(10)));
    const Event& e = p.b_events().back();
    ASSERT_TRUE(e.status.ok());
    ASSERT_EQ(0, std::memcmp(e.data, m.data(), m.size()));
  }
}

TEST(ConnectionTest, FecAutoTurnsOffOnACleanLinkAndOnUnderLoss) {
  TransportConfig c = PipeTestConfig();
  c.fec = FecMode::kAuto;
  {
    // A clean link shows itself only over enough packets: no loss in n packets bounds
    // the loss rate by ~3/n, so FEC stays on until 3/n times a message's packets is
    // within the per-message target ((1 - 0.98) / 4 / (1 + 1.5 messages per RTT)).
    c.fec_tail = 0.98;
    ConnectionPair p(c, c);
    SendRounds(p, 40, 50000);  // 2 000 packets
    EXPECT_GT(p.a().debug_state().fec_m, 0u) << "2 000 clean packets do not show a clean link";
    SendRounds(p, 3500, 50000);  // 177 000 packets
    EXPECT_EQ(p.a().debug_state().fec_m, 0u) << "FEC should be off on a clean link";
    EXPECT_STREQ(p.a().debug_state().fec_reason, "not-needed")
        << "loss " << p.a().debug_state().fec_loss_estimate << " expected repairs "
        << p.a().debug_state().fec_expected_repairs;
    c.fec_tail = TransportConfig().fec_tail;
  }
  {
    ConnectionPair p(c, c);
    DropRandomly(p, /*dir=*/0, 0.01, /*seed=*/11);
    SendRounds(p, 60, 500000);
    EXPECT_GT(p.a().debug_state().fec_m, 0u) << "FEC should be on at 1% loss";
    EXPECT_NEAR(p.a().debug_state().peer_loss_rate, 0.01, 0.006);
    EXPECT_GT(p.b().stats().fec_recovered_packets, 0u);
  }
}

TEST(ConnectionTest, SegmentsFollowASmallerPathMtu) {
  TransportConfig c = PipeTestConfig();
  c.segment = 8000;
  ConnectionPair p(c, c);
  size_t largest = 0;
  bool shrunk = false;
  uint64_t data_seen = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir != 0 || !IsDataPacket(d)) return v;
    if (data_seen++ == 5) {
      v.drop = true;  // a large packet lost before the MTU drop: resent in small pieces
      p.a().OnPathMtu(1500);
      shrunk = true;
      return v;
    }
    if (shrunk && data_seen > 7) largest = std::max(largest, d.size());
    return v;
  });
  SendAndVerify(p, {300000}, Duration::Seconds(5));
  EXPECT_EQ(p.a().segment(), TransportConfig::SegmentForMtu(1500));
  EXPECT_GT(largest, 0u);
  EXPECT_LE(largest + 28, 1500u);
}

TEST(ConnectionTest, LostRetransmissionIsRepairedAgain) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  // 200: the first repair of packet 5.
  DropDataPackets(p, [](uint64_t i) { return i == 5 || i == 200; });
  SendAndVerify(p, {400000}, Duration::Seconds(10));
  EXPECT_GE(p.a().stats().packets_retransmitted, 2u);
}

TEST(ConnectionTest, SmallReorderingIsNotLoss) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  // Hold every 50th data packet back by 5 packet times (well inside the thresholds).
  DelayDataPackets(p, [](uint64_t i) { return i % 50 == 25; }, Duration::Microseconds(40));
  SendAndVerify(p, {1000000}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().packets_lost, 0u);
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
}

TEST(ConnectionTest, DeepReorderingWidensTheThreshold) {
  TransportConfig c = PipeTestConfig();
  c.reorder_packets = 4;
  ConnectionPair p(c, c);
  // Delay one packet by 100 packet times (0.8 ms): declared lost, then acknowledged.
  DelayDataPackets(p, [](uint64_t i) { return i == 30; }, Duration::Microseconds(800));
  SendAndVerify(p, {1000000}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().spurious_losses, 1u);
  EXPECT_GT(p.a().debug_state().reorder_packets, 4u);
}

// A batching driver's wake-up: the pacing release taken one quantum late at the pacing
// rate (capped at half the pacing burst), every other deadline as it is; waking then
// finds the quantum's worth due (the pacer's catch-up), sent back to back.
TEST(ConnectionTest, NextWakeTakesAPacingReleaseOneQuantumLate) {
  TransportConfig c = PipeTestConfig();
  c.rate = Bandwidth::Gbps(8);
  c.pacing_burst = Duration::Milliseconds(1);
  Connection conn(c, ConnectionIds{1, 2}, 7, Time::Zero());
  std::vector<uint8_t> msg(4 << 20, 1);
  ASSERT_TRUE(conn.Send(SendBuffer{msg.data(), msg.size()}, 1).ok());
  std::vector<uint8_t> buf(c.MaxDatagramSize());
  Time now = Time::Zero() + Duration::Milliseconds(1);
  // Send until the pacer holds the next datagram back.
  int sent = 0;
  while (conn.PollTransmit(now, buf.data(), buf.size()) > 0) ++sent;
  ASSERT_GT(sent, 0);
  const Time release = conn.NextTimeout();
  ASSERT_GT(release, now);
  EXPECT_EQ(conn.NextWake(0), release);
  // 64 KiB at 8 Gbit/s: 65.536 us late.
  EXPECT_EQ(conn.NextWake(64 << 10), release + Duration::Nanoseconds(65536));
  // 1 MiB would be 1.05 ms: capped at half the pacing burst.
  EXPECT_EQ(conn.NextWake(1 << 20), release + Duration::Microseconds(500));
  // Waking then finds about a quantum due, sent at once.
  now = conn.NextWake(64 << 10);
  size_t bytes = 0;
  while (size_t n = conn.PollTransmit(now, buf.data(), buf.size())) bytes += n;
  EXPECT_GE(bytes, size_t{60} << 10);
  EXPECT_LE(bytes, size_t{72} << 10);
  // Nothing to pace: the same deadlines.
  Connection idle(c, ConnectionIds{3, 4}, 7, Time::Zero());
  EXPECT_EQ(idle.NextWake(64 << 10), idle.NextTimeout());
}

TEST(ConnectionTest, CorruptionIsDetectedAndRepaired) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  p.set_filter([&](int dir, uint64_t i, const std::vector<uint8_t>&) {
    FilterVerdict v;
    if (dir == 0 && i % 37 == 3) v.corrupt = true;
    return v;
  });
  SendAndVerify(p, {300000, 7, 0, 50000}, Duration::Seconds(10));
  EXPECT_GT(p.b().stats().checksum_failures, 0u);
  EXPECT_GT(p.a().stats().packets_retransmitted, 0u);
}

TEST(ConnectionTest, DuplicatesAreIgnored) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  p.set_filter([&](int dir, uint64_t i, const std::vector<uint8_t>&) {
    FilterVerdict v;
    v.duplicate = i % 3 == 0;
    return v;
  });
  SendAndVerify(p, {100000, 0, 1}, Duration::Seconds(5));
  EXPECT_EQ(p.a().stats().packets_retransmitted, 0u);
}

TEST(ConnectionTest, HeavyRandomLossStillDeliversIntact) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  DropRandomly(p, /*dir=*/-1, 0.05, /*seed=*/99);  // both directions, ACKs included
  SendAndVerify(p, {2000000, 1, 0, 77777, 300}, Duration::Seconds(30));
  EXPECT_GT(p.a().stats().packets_lost, 50u);
}

TEST(ConnectionTest, PostedBuffersReceiveInPlace) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(70000, 0));
  for (size_t i = 0; i < bufs.size(); ++i) {
    ASSERT_TRUE(p.b().PostReceive(bufs[i].data(), bufs[i].size(), 500 + i).ok());
  }
  auto m0 = Pattern(70000, 1), m1 = Pattern(100, 2), m2 = Pattern(80000, 3);
  ASSERT_TRUE(p.a().Send(SendBuffer{m0.data(), m0.size()}, 0).ok());
  ASSERT_TRUE(p.a().Send(SendBuffer{m1.data(), m1.size()}, 0).ok());
  ASSERT_TRUE(p.a().Send(SendBuffer{m2.data(), m2.size()}, 0).ok());  // too large
  ASSERT_TRUE(p.RunUntil([&] { return Count(p.b_events(), Event::Type::kReceiveComplete) == 3; },
                         Duration::Seconds(5)));
  auto& ev = p.b_events();
  ASSERT_TRUE(ev[0].status.ok());
  EXPECT_EQ(ev[0].data, bufs[0].data());
  EXPECT_EQ(ev[0].tag, 500u);
  EXPECT_EQ(0, std::memcmp(bufs[0].data(), m0.data(), m0.size()));
  ASSERT_TRUE(ev[1].status.ok());
  EXPECT_EQ(ev[1].size, 100u);
  EXPECT_EQ(0, std::memcmp(bufs[1].data(), m1.data(), m1.size()));
  EXPECT_EQ(ev[2].status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ev[2].size, 80000u);
}

TEST(ConnectionTest, FlowControlBoundsTheReceiverAndStillCompletes) {
  TransportConfig c = PipeTestConfig();
  c.recv_window = 20000;
  ConnectionPair p(c, c);
  DropRandomly(p, /*dir=*/0, 0.02, /*seed=*/5);
  SendAndVerify(p, {300000, 5, 40000}, Duration::Seconds(60));
  EXPECT_GT(p.a().stats().flow_control_blocked, 0u);
}

// Consumption tracking (what the datapath's handles turn on): delivered messages the
// application has not taken count against the credit, so a receiver that stops reading
// stalls the sender within one window; reading again resumes it even when the ACK that
// carries the new credit is lost (the blocked sender's PINGs fetch it).
TEST(ConnectionTest, UnconsumedMessagesHoldTheCreditUntilTheApplicationTakesThem) {
  TransportConfig c = PipeTestConfig();
  c.recv_window = 200000;
  ConnectionPair p(c, c, PipeOptions{Duration::Milliseconds(5), Bandwidth()});
  p.b().SetConsumptionTracking(true);
  bool drop_next_ack = false;
  uint64_t dropped = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>&) {
    FilterVerdict v;
    if (dir == 1 && drop_next_ack) {
      v.drop = true;
      drop_next_ack = false;
      ++dropped;
    }
    return v;
  });
  constexpr size_t kMessage = 50000, kCount = 40;
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t i = 0; i < kCount; ++i) {
    msgs.push_back(Pattern(kMessage, i + 1));
    ASSERT_TRUE(p.a().Send(SendBuffer{msgs.back().data(), kMessage}, i).ok());
  }
  auto received = [&] { return Count(p.b_events(), Event::Type::kReceiveComplete); };
  // Nobody consumes: the transfer stops after about one window.
  EXPECT_FALSE(p.RunUntil([&] { return received() == kCount; }, Duration::Seconds(10)));
  EXPECT_LE(received(), c.recv_window / kMessage + 2);
  EXPECT_GT(p.a().stats().flow_control_blocked, 0u);
  // While stalled the sender only probes for credit: one PING per 16 RTTs (10 ms) once
  // backed off, where the rest of the transfer is 1200 packets.
  const uint64_t a_sent = p.datagrams(0);
  EXPECT_FALSE(p.RunUntil([&] { return received() == kCount; }, Duration::Seconds(20)));
  EXPECT_LE(p.datagrams(0) - a_sent, 20000 / 160 + 5u);
  uint64_t credit = 0;
  for (const Event& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    EXPECT_EQ(e.credit_units, kMessage + Connection::kEventCreditCharge);
    credit += e.credit_units;
  }
  // The application takes them all; the ACK announcing the credit is lost.
  drop_next_ack = true;
  p.b().OnConsumed(credit);
  size_t consumed = received();
  ASSERT_TRUE(p.RunUntil(
      [&] {
        // Keep consuming what arrives.
        uint64_t more = 0;
        size_t seen = 0;
        for (const Event& e : p.b_events()) {
          if (e.type != Event::Type::kReceiveComplete) continue;
          if (seen++ >= consumed) more += e.credit_units;
        }
        consumed = seen;
        if (more > 0) p.b().OnConsumed(more);
        return received() == kCount &&
               Count(p.a_events(), Event::Type::kSendComplete) == kCount;
      },
      // The lost ACK costs at most one probe interval (160 ms): well inside the keepalive.
      Duration::Seconds(1)));
  EXPECT_EQ(dropped, 1u);
  size_t r = 0;
  for (const Event& e : p.b_events()) {
    if (e.type != Event::Type::kReceiveComplete) continue;
    ASSERT_TRUE(e.status.ok());
    ASSERT_EQ(e.message_id, r);
    ASSERT_EQ(0, std::memcmp(e.data, msgs[r].data(), kMessage)) << r;
    ++r;
  }
}

TEST(ConnectionTest, PacingSpreadsPacketsAtTheRate) {
  TransportConfig c = PipeTestConfig();
  c.rate = Bandwidth::Mbps(100);
  ConnectionPair p(c, c, PipeOptions{Duration::Milliseconds(1), Bandwidth()});
  const Time start = p.now();
  SendAndVerify(p, {1000000}, Duration::Seconds(5));
  // 1 MB plus headers at 100 Mbit/s takes at least 80 ms; with no pacing it would take ~1 ms.
  Duration took = p.now() - start;
  EXPECT_GE(took, Duration::Milliseconds(80));
  EXPECT_LE(took, Duration::Milliseconds(95));
}

TEST(ConnectionTest, WindowLimitsThroughputToWindowOverRtt) {
  TransportConfig c = PipeTestConfig();
  c.rate = Bandwidth::Gbps(10);
  c.window = 64 * 1024;
  ConnectionPair p(c, c, PipeOptions{Duration::Milliseconds(25), Bandwidth()});
  const Time start = p.now();
  SendAndVerify(p, {4 << 20}, Duration::Seconds(60));
  double secs = (p.now() - start).seconds();
  double gbps = (4 << 20) * 8 / secs / 1e9;
  double expected = 64.0 * 1024 * 8 / 0.050 / 1e9;  // window / RTT
  EXPECT_NEAR(gbps, expected, expected * 0.15);
}

TEST(ConnectionTest, BytesInFlightNeverExceedTheWindow) {
  TransportConfig c = PipeTestConfig();
  c.window = 100000;
  ConnectionPair p(c, c);
  ByteCount max_seen = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>&) {
    if (dir == 0) max_seen = std::max(max_seen, p.a().debug_state().bytes_in_flight);
    return FilterVerdict{};
  });
  SendAndVerify(p, {3000000}, Duration::Seconds(30));
  EXPECT_LE(max_seen, c.window);
  EXPECT_GT(max_seen, c.window / 2);
}

TEST(ConnectionTest, CleanCloseReachesThePeer) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  SendAndVerify(p, {5000}, Duration::Seconds(5));
  p.a().Close(CloseCode::kNoError, "done");
  ASSERT_TRUE(p.RunUntil([&] { return p.a().closed() && p.b().closed(); }, Duration::Seconds(5)));
  ASSERT_EQ(p.b_events().back().type, Event::Type::kClosed);
  EXPECT_TRUE(p.b_events().back().status.ok());
  EXPECT_FALSE(p.a().Send(SendBuffer{nullptr, 0}, 0).ok());
}

TEST(ConnectionTest, VanishedPeerIsReportedAfterIdleTimeout) {
  TransportConfig c = PipeTestConfig();
  c.idle_timeout = Duration::Seconds(2);
  c.keepalive = Duration::Milliseconds(500);
  ConnectionPair p(c, c);
  DropAll(p, /*dir=*/1);  // b never answers
  auto m = Pattern(50000, 1);
  ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), m.size()}, 9).ok());
  ASSERT_TRUE(p.RunUntil([&] { return p.a().closed(); }, Duration::Seconds(10)));
  auto& ev = p.a_events();
  ASSERT_EQ(ev.back().type, Event::Type::kClosed);
  EXPECT_EQ(ev.back().status.code(), absl::StatusCode::kDeadlineExceeded);
  // The message that could not be delivered was reported, not silently dropped.
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].type, Event::Type::kSendComplete);
  EXPECT_EQ(ev[ev.size() - 2].status.code(), absl::StatusCode::kCancelled);
}

TEST(ConnectionTest, CloseHandsBackPendingSendsAndPostedReceivesWithTheirTags) {
  TransportConfig c = PipeTestConfig();
  c.idle_timeout = Duration::Seconds(1);
  ConnectionPair p(c, c);
  DropAll(p, /*dir=*/-1);  // nothing gets through
  auto m = Pattern(5000, 1);
  ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), m.size()}, 77).ok());
  ASSERT_TRUE(p.a().Send(SendBuffer{m.data(), 10}, 78).ok());
  std::vector<uint8_t> rbuf(100);
  ASSERT_TRUE(p.a().PostReceive(rbuf.data(), rbuf.size(), 99).ok());
  ASSERT_TRUE(p.RunUntil([&] { return p.a().closed(); }, Duration::Seconds(5)));
  auto& ev = p.a_events();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].type, Event::Type::kSendComplete);
  EXPECT_EQ(ev[0].tag, 77u);
  EXPECT_EQ(ev[0].size, 5000u);
  EXPECT_EQ(ev[0].status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(ev[1].tag, 78u);
  EXPECT_EQ(ev[1].size, 10u);
  EXPECT_EQ(ev[2].type, Event::Type::kReceiveComplete);
  EXPECT_EQ(ev[2].tag, 99u);
  EXPECT_EQ(ev[2].data, rbuf.data());
  EXPECT_EQ(ev[2].status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(ev[3].type, Event::Type::kClosed);
}

// Hands `conn` (a PipeTestConfig connection) one 1-RTT packet, number 0, carrying what
// `frames` writes, at t = 5 ns; expects it to answer with a CLOSE and be closed.
void DeliverFramesAndExpectClose(Connection& conn,
                                 const std::function<void(wire::PacketWriter&)>& frames) {
  const size_t size = PipeTestConfig().MaxDatagramSize();
  conn.OnDatagram(Time::FromNanoseconds(5),
                  testing::BuildPacket(wire::PacketHeader{wire::PacketType::kOneRtt, 0, 1, 0},
                                       frames, size));
  std::vector<uint8_t> out(size);
  EXPECT_GT(conn.PollTransmit(Time::FromNanoseconds(6), out.data(), out.size()), 0u);  // CLOSE
  EXPECT_TRUE(conn.closed());
}

TEST(ConnectionTest, AnnouncedHugeMessageWithoutAPostedBufferClosesCleanly) {
  // A peer announcing a 16 TiB message must not make the receiver allocate it.
  Connection conn(PipeTestConfig(), ConnectionIds{1, 2}, 1, Time::FromNanoseconds(1));
  uint8_t payload[16] = {};
  wire::DataFrame d;
  d.message_id = 0;
  d.message_length = ByteCount{1} << 44;
  d.offset = 0;
  d.length = sizeof(payload);
  d.payload = payload;
  DeliverFramesAndExpectClose(conn, [&](wire::PacketWriter& w) {
    ASSERT_NE(w.WriteData(d), nullptr);
  });
  Event e;
  bool saw_close = false;
  while (conn.PollEvent(&e)) {
    if (e.type == Event::Type::kClosed) {
      saw_close = true;
      EXPECT_NE(std::string(e.status.message()).find("needs a posted receive buffer"),
                std::string::npos)
          << e.status;
    }
  }
  EXPECT_TRUE(saw_close);
}

TEST(ConnectionTest, GarbageDatagramsAreCountedAndIgnored) {
  TransportConfig c = PipeTestConfig();
  Connection conn(c, ConnectionIds{1, 2}, 1, Time::FromNanoseconds(1));
  Rng r(3);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> g(r.UniformInt(200));
    for (auto& b : g) b = static_cast<uint8_t>(r.Next());
    if (!g.empty() && i % 2 == 0) g[0] = wire::kVersion;
    conn.OnDatagram(Time::FromNanoseconds(10 + i), g);
  }
  EXPECT_FALSE(conn.closed());
  EXPECT_EQ(conn.stats().packets_received, 0u);
  EXPECT_GT(conn.stats().malformed_packets + conn.stats().checksum_failures, 1900u);
}

TEST(ConnectionTest, AckForAnUnsentPacketIsAProtocolViolation) {
  Connection conn(PipeTestConfig(), ConnectionIds{1, 2}, 1, Time::FromNanoseconds(1));
  wire::AckFrame ack;
  ack.largest = 1000;
  std::vector<wire::AckRange> ranges{{1000, 1000}};
  // The connection sends a CLOSE and reports the error.
  DeliverFramesAndExpectClose(conn, [&](wire::PacketWriter& w) {
    ASSERT_EQ(w.WriteAck(ack, ranges, 8), 1u);
  });
  Event e;
  ASSERT_TRUE(conn.PollEvent(&e));
  EXPECT_EQ(e.type, Event::Type::kClosed);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace longhaul
