// The driver-state channel (Connection::SetDriverState / TakePeerDriverState) and the
// driver's datagram limit (Connection::SetDatagramLimit), over the ConnectionPair pipe.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_config.h"
#include "tests/support/wire_packets.h"
#include "transport/core/connection.h"
#include "transport/testing/connection_pair.h"
#include "transport/wire/packet.h"

namespace longhaul {
namespace {

using testing::ConnectionPair;
using testing::FilterVerdict;
using testing::Pattern;
using testing::PipeTestConfig;
using ::testing::HasSubstr;

// Whether a datagram carries a frame of type `t` (false if it does not parse).
bool Carries(const std::vector<uint8_t>& d, wire::FrameType t) {
  absl::StatusOr<std::vector<wire::Frame>> frames = testing::DecodeDatagram(d);
  if (!frames.ok()) return false;
  return std::any_of(frames->begin(), frames->end(),
                     [&](const wire::Frame& f) { return f.type == t; });
}
bool CarriesState(const std::vector<uint8_t>& d) {
  return Carries(d, wire::FrameType::kDriverState);
}

// Runs the pair until b has a new peer state, and takes it.
std::vector<uint8_t> TakeAtB(ConnectionPair& p, Duration limit = Duration::Seconds(2)) {
  std::vector<uint8_t> got;
  EXPECT_TRUE(p.RunUntil([&] { return p.b().has_new_peer_driver_state(); }, limit));
  EXPECT_TRUE(p.b().TakePeerDriverState(&got));
  return got;
}

TEST(DriverStateTest, ReachesThePeerOnce) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  const std::vector<uint8_t> state = Pattern(100, 1);
  ASSERT_TRUE(p.a().SetDriverState(state).ok());
  // Due at once, though nothing else is to be sent.
  EXPECT_LE(p.a().NextTimeout(), p.now());
  EXPECT_EQ(TakeAtB(p), state);
  EXPECT_FALSE(p.b().has_new_peer_driver_state());
  std::vector<uint8_t> again = {9};
  EXPECT_FALSE(p.b().TakePeerDriverState(&again));
  EXPECT_EQ(again, std::vector<uint8_t>{9});  // untouched
  // Acknowledged: nothing more is sent of it.
  p.RunUntil([] { return false; }, Duration::Milliseconds(500));
  EXPECT_EQ(p.a().stats().driver_state_sent, 1u);
  EXPECT_EQ(p.a().stats().driver_state_resent, 0u);
  EXPECT_EQ(p.b().stats().driver_state_received, 1u);
  EXPECT_FALSE(p.b().has_new_peer_driver_state());
  // The other direction, and an empty state.
  ASSERT_TRUE(p.b().SetDriverState({}).ok());
  ASSERT_TRUE(p.RunUntil([&] { return p.a().has_new_peer_driver_state(); }, Duration::Seconds(2)));
  std::vector<uint8_t> got = {1, 2, 3};
  ASSERT_TRUE(p.a().TakePeerDriverState(&got));
  EXPECT_TRUE(got.empty());
}

TEST(DriverStateTest, TheNewestStateWins) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  // Two updates before a PollTransmit: only the newer one is sent.
  const std::vector<uint8_t> v1 = Pattern(40, 1), v2 = Pattern(50, 2), v3 = Pattern(60, 3);
  ASSERT_TRUE(p.a().SetDriverState(v1).ok());
  ASSERT_TRUE(p.a().SetDriverState(v2).ok());
  EXPECT_EQ(TakeAtB(p), v2);
  EXPECT_EQ(p.a().stats().driver_state_sent, 1u);

  // v3 leaves, then v4 while v3 is on its way; v3 is held up and arrives after v4: the
  // receiver keeps v4 and never goes back to v3.
  const std::vector<uint8_t> v4 = Pattern(70, 4);
  bool held = false;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir == 0 && CarriesState(d) && !held) {
      held = true;
      v.extra_delay = Duration::Milliseconds(50);
    }
    return v;
  });
  ASSERT_TRUE(p.a().SetDriverState(v3).ok());
  ASSERT_TRUE(p.RunUntil([&] { return p.a().stats().driver_state_sent == 2; },
                         Duration::Seconds(1)));
  ASSERT_TRUE(held);
  ASSERT_TRUE(p.a().SetDriverState(v4).ok());
  std::vector<std::vector<uint8_t>> taken;
  p.RunUntil(
      [&] {
        std::vector<uint8_t> s;
        if (p.b().TakePeerDriverState(&s)) taken.push_back(s);
        return false;
      },
      Duration::Milliseconds(300));
  EXPECT_EQ(p.b().stats().driver_state_received, 3u);  // v2, v4, then the late v3
  // v3's packet may be declared lost once v4's is acknowledged: v3 is not resent.
  EXPECT_EQ(p.a().stats().driver_state_sent, 3u);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0], v4);
}

// The packet carrying the state is lost on an idle connection: the probe timeout's probe
// is acknowledged, loss detection declares the state's packet lost, and it is resent.
TEST(DriverStateTest, ALostStateIsResent) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  int dropped = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir == 0 && CarriesState(d) && dropped == 0) {
      ++dropped;
      v.drop = true;
    }
    return v;
  });
  const std::vector<uint8_t> state = Pattern(wire::kMaxDriverState, 5);
  ASSERT_TRUE(p.a().SetDriverState(state).ok());
  EXPECT_EQ(TakeAtB(p, Duration::Seconds(5)), state);
  EXPECT_EQ(dropped, 1);
  EXPECT_GE(p.a().stats().packets_lost, 1u);
  EXPECT_EQ(p.a().stats().driver_state_sent, 2u);
  EXPECT_EQ(p.a().stats().driver_state_resent, 1u);
}

// Data going out now carries the state in front of its data (no packet of its own); a
// lost one is resent once loss detection finds its packet missing.
TEST(DriverStateTest, RidesWithDataAndIsResentAfterLoss) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  int carriers = 0, dropped = 0;
  bool first_had_data = false;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    FilterVerdict v;
    if (dir != 0 || !CarriesState(d)) return v;
    if (carriers++ == 0) {
      first_had_data = testing::IsDataPacket(d);
      v.drop = true;
      ++dropped;
    }
    return v;
  });
  const std::vector<uint8_t> state = Pattern(300, 7);
  const std::vector<uint8_t> message = Pattern(2'000'000, 6);
  ASSERT_TRUE(p.a().SetDriverState(state).ok());
  ASSERT_TRUE(p.a().Send(SendBuffer{message.data(), message.size()}, 1).ok());
  EXPECT_EQ(TakeAtB(p), state);
  EXPECT_TRUE(first_had_data);
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(carriers, 2);
  EXPECT_EQ(p.a().stats().driver_state_resent, 1u);
  ASSERT_TRUE(p.RunUntil(
      [&] { return p.b().stats().data_bytes_received == message.size(); }, Duration::Seconds(5)));
  EXPECT_EQ(p.b().stats().duplicate_data_bytes, 0u);
}

// With FEC on, the state never rides an FEC packet (a rebuilt packet would be
// acknowledged without it): it goes in a packet of its own, also when data is ready to
// go at the same time, and the data follows.
TEST(DriverStateTest, GoesAloneBesideFecPackets) {
  TransportConfig c = PipeTestConfig();
  c.fec = FecMode::kFixed;
  c.fec_k = 8;
  c.fec_m = 2;
  c.fec_interleave = 1;
  ConnectionPair p(c, c);
  int carriers = 0, fec_carriers = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    if (dir == 0 && CarriesState(d)) {
      ++carriers;
      fec_carriers += Carries(d, wire::FrameType::kFecSource) ||
                      Carries(d, wire::FrameType::kFecRepair) || testing::IsDataPacket(d);
    }
    return FilterVerdict{};
  });
  const std::vector<uint8_t> message = Pattern(1'000'000, 8);
  const std::vector<uint8_t> s1 = Pattern(500, 9), s2 = Pattern(600, 10);
  ASSERT_TRUE(p.a().SetDriverState(s1).ok());
  ASSERT_TRUE(p.a().Send(SendBuffer{message.data(), message.size()}, 1).ok());
  EXPECT_EQ(TakeAtB(p), s1);
  // And again while the data flows.
  ASSERT_TRUE(p.RunUntil([&] { return p.b().stats().data_bytes_received > 100'000; },
                         Duration::Seconds(2)));
  ASSERT_TRUE(p.a().SetDriverState(s2).ok());
  EXPECT_EQ(TakeAtB(p), s2);
  EXPECT_EQ(carriers, 2);
  EXPECT_EQ(fec_carriers, 0);
  ASSERT_TRUE(p.RunUntil(
      [&] { return p.b().stats().data_bytes_received == message.size(); }, Duration::Seconds(5)));
  EXPECT_GT(p.a().stats().fec_repair_packets_sent, 0u);
}

TEST(DriverStateTest, RefusesOverLongStatesAndClosedConnections) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  const std::vector<uint8_t> big(wire::kMaxDriverState + 1, 1);
  absl::Status s = p.a().SetDriverState(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("1025"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("1024"));
  EXPECT_TRUE(p.a().SetDriverState(std::vector<uint8_t>(wire::kMaxDriverState, 1)).ok());

  // A pending state is not sent once the connection closes; nothing is accepted then.
  int carriers = 0;
  p.set_filter([&](int, uint64_t, const std::vector<uint8_t>& d) {
    carriers += CarriesState(d);
    return FilterVerdict{};
  });
  p.a().Close(CloseCode::kNoError, "done");
  EXPECT_EQ(p.a().SetDriverState(Pattern(10, 1)).code(), absl::StatusCode::kFailedPrecondition);
  p.RunUntil([] { return false; }, Duration::Milliseconds(200));
  EXPECT_TRUE(p.a().closed());
  EXPECT_EQ(carriers, 0);
  EXPECT_FALSE(p.b().has_new_peer_driver_state());
}

// The largest datagram a's PollTransmit produced while sending `bytes` to b.
size_t LargestDatagram(ConnectionPair& p, size_t bytes, uint8_t seed) {
  size_t largest = 0;
  p.set_filter([&](int dir, uint64_t, const std::vector<uint8_t>& d) {
    if (dir == 0) largest = std::max(largest, d.size());
    return FilterVerdict{};
  });
  const std::vector<uint8_t> message = Pattern(bytes, seed);
  const uint64_t before = p.b().stats().data_bytes_received;
  EXPECT_TRUE(p.a().Send(SendBuffer{message.data(), message.size()}, seed).ok());
  EXPECT_TRUE(p.RunUntil(
      [&] { return p.b().stats().data_bytes_received == before + bytes; }, Duration::Seconds(5)));
  EXPECT_TRUE(p.RunUntil([&] { return p.a().pending_send_messages() == 0; },
                         Duration::Seconds(2)));
  p.set_filter(nullptr);
  return largest;
}

TEST(DriverStateTest, DatagramLimitLowersAndRaisesTheSize) {
  TransportConfig c = PipeTestConfig();
  c.segment = 8000;
  const ByteCount max = c.MaxDatagramSize();
  ConnectionPair p(c, c);
  const size_t full = LargestDatagram(p, 200'000, 1);
  EXPECT_LE(full, max);
  EXPECT_GT(full, max - 100);

  p.a().SetDatagramLimit(1500);
  EXPECT_EQ(p.a().segment(), 1500 - (max - c.segment));
  EXPECT_EQ(p.a().debug_state().datagram_size, 1500u);
  const size_t small = LargestDatagram(p, 200'000, 2);
  EXPECT_LE(small, 1500u);
  EXPECT_GT(small, 1400u);

  // A larger datapath came up: the size rises at once, above the old limit.
  p.a().SetDatagramLimit(6000);
  EXPECT_EQ(p.a().segment(), 6000 - (max - c.segment));
  const size_t raised = LargestDatagram(p, 500'000, 3);
  EXPECT_GT(raised, 1500u);
  EXPECT_LE(raised, 6000u);

  // Never above the configured size, never below 64 bytes of segment.
  p.a().SetDatagramLimit(1 << 20);
  EXPECT_EQ(p.a().segment(), c.segment);
  const size_t back = LargestDatagram(p, 200'000, 4);
  EXPECT_LE(back, max);
  EXPECT_GT(back, max - 100);
  p.a().SetDatagramLimit(10);
  EXPECT_EQ(p.a().segment(), 64u);
  EXPECT_LE(LargestDatagram(p, 20'000, 5), 64 + (max - c.segment));
}

// A state longer than the current datagram size carries waits (without a busy loop)
// until the limit is raised again.
TEST(DriverStateTest, WaitsForADatagramLargeEnough) {
  ConnectionPair p(PipeTestConfig(), PipeTestConfig());
  p.a().SetDatagramLimit(400);
  const std::vector<uint8_t> state = Pattern(800, 3);
  ASSERT_TRUE(p.a().SetDriverState(state).ok());
  EXPECT_FALSE(p.RunUntil([&] { return p.b().has_new_peer_driver_state(); },
                          Duration::Milliseconds(200), 10'000));
  EXPECT_EQ(p.a().stats().driver_state_sent, 0u);
  EXPECT_GT(p.a().NextTimeout(), p.now());  // not due while it cannot go
  p.a().SetDatagramLimit(PipeTestConfig().MaxDatagramSize());
  EXPECT_EQ(TakeAtB(p), state);
}

}  // namespace
}  // namespace longhaul
