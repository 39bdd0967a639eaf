// RateSampler driven with synthetic sends and ACKs: the steady-state rate of a paced
// flight, the longer of the send and ACK intervals (ACK compression), the min-RTT floor,
// app-limited marking, and the interval restart after idle.
#include "transport/core/cc/rate_sampler.h"

#include <vector>

#include "gtest/gtest.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {
namespace {

const Time kT0 = Time::Zero() + Duration::Seconds(1);
constexpr uint32_t kBytes = 1000;

class Flight {
 public:
  explicit Flight(Time start = kT0) : rate_(start) {}

  // Sends the next packet at `now`; returns its index.
  size_t Send(Time now) {
    SentPacket p;
    p.sent_time = now;
    p.bytes = kBytes;
    p.in_flight = true;
    rate_.OnPacketSent(now, in_flight_, &p);
    in_flight_ += kBytes;
    packets_.push_back(p);
    return packets_.size() - 1;
  }
  // One ACK frame acknowledging `indices` (in walk order) at `now`.
  RateSample Ack(Time now, const std::vector<size_t>& indices, Duration min_rtt,
                 bool newly_delivered = true) {
    rate_.BeginAck();
    for (size_t i : indices) {
      rate_.OnPacketAcked(packets_[i], newly_delivered);
      if (newly_delivered) in_flight_ -= kBytes;
    }
    rate_.EndAck(now, !indices.empty());
    return rate_.GenerateSample(now, min_rtt);
  }

  RateSampler rate_;
  std::vector<SentPacket> packets_;
  ByteCount in_flight_ = 0;
};

TEST(RateSamplerTest, SteadyFlightSamplesItsSendingRate) {
  // One 1000-byte packet every 10 us (800 Mbit/s), each acknowledged 1 ms later.
  Flight f;
  constexpr Duration kGap = Duration::Microseconds(10);
  constexpr Duration kRtt = Duration::Milliseconds(1);
  constexpr int kPackets = 1000;
  RateSample last;
  size_t next_ack = 0;
  for (int i = 0; i < kPackets; ++i) {
    const Time send_at = kT0 + kGap * i;
    // ACKs due by now come first.
    while (next_ack < f.packets_.size() && f.packets_[next_ack].sent_time + kRtt <= send_at) {
      last = f.Ack(f.packets_[next_ack].sent_time + kRtt, {next_ack}, kRtt);
      ++next_ack;
    }
    f.Send(send_at);
  }
  ASSERT_GT(next_ack, 500u);
  EXPECT_EQ(last.interval, kRtt);
  EXPECT_EQ(last.delivered, 100u * kBytes);  // one RTT's worth
  EXPECT_DOUBLE_EQ(last.delivery_rate.bps(), 800e6);
  EXPECT_EQ(last.rtt, kRtt);
  EXPECT_FALSE(last.is_app_limited);
}

TEST(RateSamplerTest, CompressedAcksDoNotInflateTheRate) {
  Flight f;
  const Duration us = Duration::Microseconds(1);
  for (int i = 0; i < 10; ++i) f.Send(kT0 + us * (100 * i));  // P0..P9, 100 us apart
  // P0 alone after 1 ms: 1000 bytes over the 1 ms since the flight started.
  RateSample s = f.Ack(kT0 + us * 1000, {0}, Duration::Milliseconds(1));
  EXPECT_EQ(s.interval, Duration::Milliseconds(1));
  EXPECT_DOUBLE_EQ(s.delivery_rate.bps(), 8e6);
  f.Send(kT0 + us * 1000);  // P10: delivered 1000, its interval started with P0
  f.Ack(kT0 + us * 1040, {1, 2, 3, 4, 5, 6, 7, 8, 9}, Duration::Milliseconds(1));
  // P10's ACK comes 50 us after the previous delivery, but P10 was sent 1 ms into its
  // interval: the interval is the longer one, 10000 bytes / 1 ms, not / 50 us.
  s = f.Ack(kT0 + us * 1050, {10}, Duration::Milliseconds(1));
  EXPECT_EQ(s.delivered, 10u * kBytes);
  EXPECT_EQ(s.interval, Duration::Milliseconds(1));
  EXPECT_DOUBLE_EQ(s.delivery_rate.bps(), 80e6);
}

TEST(RateSamplerTest, IntervalsShorterThanHalfTheMinRttGiveNoRate) {
  Flight f;
  f.Send(kT0);
  const RateSample s = f.Ack(kT0 + Duration::Milliseconds(1), {0}, Duration::Milliseconds(10));
  EXPECT_EQ(s.interval, Duration::Milliseconds(1));
  EXPECT_EQ(s.delivered, kBytes);
  EXPECT_TRUE(s.delivery_rate.IsZero());
}

TEST(RateSamplerTest, TheSampleComesFromTheFirstPacketOfTheWalk) {
  Flight f;
  f.Send(kT0);
  f.Send(kT0 + Duration::Milliseconds(1));
  // The walk meets packet 1 first (say, the higher range): its RTT is the sample's.
  const RateSample s = f.Ack(kT0 + Duration::Milliseconds(3), {1, 0}, Duration::Milliseconds(1));
  EXPECT_EQ(s.rtt, Duration::Milliseconds(2));
  EXPECT_EQ(s.delivered, 2u * kBytes);
  EXPECT_EQ(f.rate_.delivered(), 2u * kBytes);
  EXPECT_EQ(f.rate_.debug_state().first_sent_time, kT0 + Duration::Milliseconds(1));
}

TEST(RateSamplerTest, AnAckWithoutInFlightPacketsGivesNoSample) {
  Flight f;
  f.Send(kT0);
  const RateSample s = f.Ack(kT0 + Duration::Milliseconds(1), {}, Duration::Milliseconds(1));
  EXPECT_TRUE(s.delivery_rate.IsZero());
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_EQ(f.rate_.debug_state().first_sent_time, kT0);
  EXPECT_EQ(f.rate_.debug_state().delivered_time, kT0);  // nothing new was acknowledged
}

TEST(RateSamplerTest, LateAcksOfLostPacketsAreNotDeliveries) {
  Flight f;
  f.Send(kT0);
  f.Ack(kT0 + Duration::Milliseconds(1), {0}, Duration::Milliseconds(1),
        /*newly_delivered=*/false);
  EXPECT_EQ(f.rate_.delivered(), 0u);
}

TEST(RateSamplerTest, AppLimitedUntilWhatWasInFlightIsDelivered) {
  Flight f;
  f.Send(kT0);
  f.Send(kT0);
  f.Send(kT0);
  EXPECT_FALSE(f.rate_.app_limited());
  f.rate_.OnAppLimited(f.in_flight_);  // 3000 bytes out, nothing more to send
  EXPECT_TRUE(f.rate_.app_limited());
  EXPECT_EQ(f.rate_.debug_state().app_limited_until, 3u * kBytes);
  const size_t marked = f.Send(kT0 + Duration::Milliseconds(1));
  EXPECT_TRUE(f.packets_[marked].is_app_limited);
  const Duration rtt = Duration::Milliseconds(1);
  f.Ack(kT0 + Duration::Milliseconds(1), {0, 1}, rtt);
  EXPECT_TRUE(f.rate_.app_limited());  // 2000 of the 3000 bytes delivered
  f.Ack(kT0 + Duration::Milliseconds(1), {2}, rtt);
  EXPECT_FALSE(f.rate_.app_limited());
  // The marked packet's sample says so; a packet sent now is not marked.
  EXPECT_TRUE(f.Ack(kT0 + Duration::Milliseconds(2), {marked}, rtt).is_app_limited);
  EXPECT_FALSE(f.packets_[f.Send(kT0 + Duration::Milliseconds(2))].is_app_limited);
}

TEST(RateSamplerTest, AppLimitedWithNothingInFlightLastsUntilTheNextDelivery) {
  Flight f;
  f.rate_.OnAppLimited(0);
  EXPECT_TRUE(f.rate_.app_limited());
  const size_t p = f.Send(kT0);
  EXPECT_TRUE(f.packets_[p].is_app_limited);
  f.Ack(kT0 + Duration::Milliseconds(1), {p}, Duration::Milliseconds(1));
  EXPECT_FALSE(f.rate_.app_limited());
}

TEST(RateSamplerTest, AFlightFromNothingInFlightRestartsTheInterval) {
  Flight f;
  f.Send(kT0);
  f.Ack(kT0 + Duration::Milliseconds(1), {0}, Duration::Milliseconds(1));
  // Idle for a second: the next flight's interval starts when it is sent, so the idle
  // time does not dilute its first sample.
  const Time later = kT0 + Duration::Seconds(1);
  const size_t p = f.Send(later);
  EXPECT_EQ(f.packets_[p].first_sent_time, later);
  EXPECT_EQ(f.packets_[p].delivered_time, later);
  EXPECT_EQ(f.packets_[p].delivered, kBytes);
  const RateSample s = f.Ack(later + Duration::Milliseconds(1), {p}, Duration::Milliseconds(1));
  EXPECT_EQ(s.interval, Duration::Milliseconds(1));
  EXPECT_DOUBLE_EQ(s.delivery_rate.bps(), 8e6);
}

}  // namespace
}  // namespace longhaul
