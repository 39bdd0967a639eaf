#include "transport/core/cc/rate_sampler.h"

#include <algorithm>

#include "transport/core/send/sent_packet_table.h"

namespace longhaul {

void RateSampler::OnPacketSent(Time now, ByteCount bytes_in_flight, SentPacket* p) {
  if (bytes_in_flight == 0) {
    // Nothing in flight: the ACK clock restarts, so does the interval.
    first_sent_time_ = now;
    delivered_time_ = now;
  }
  p->delivered = delivered_;
  p->delivered_time = delivered_time_;
  p->first_sent_time = first_sent_time_;
  p->is_app_limited = app_limited_until_ > 0;
}

void RateSampler::OnAppLimited(ByteCount bytes_in_flight) {
  app_limited_until_ = delivered_ + bytes_in_flight;
  if (app_limited_until_ == 0) app_limited_until_ = 1;  // 0 means "not limited"
}

void RateSampler::OnPacketAcked(const SentPacket& p, bool newly_delivered) {
  if (newly_delivered) delivered_ += p.bytes;
  if (!have_sample_packet_) {
    have_sample_packet_ = true;
    sample_packet_ = PacketState{p.sent_time, p.first_sent_time, p.delivered_time, p.delivered,
                                 p.is_app_limited};
  }
}

void RateSampler::EndAck(Time now, bool any_newly_acked) {
  if (any_newly_acked) delivered_time_ = now;
  if (app_limited_until_ > 0 && delivered_ >= app_limited_until_) app_limited_until_ = 0;
}

RateSample RateSampler::GenerateSample(Time now, Duration min_rtt) {
  RateSample s;
  if (!have_sample_packet_) return s;
  have_sample_packet_ = false;
  const PacketState& p = sample_packet_;
  first_sent_time_ = p.sent_time;
  const Duration send_elapsed = p.sent_time - p.first_sent_time;
  const Duration ack_elapsed = delivered_time_ - p.delivered_time;
  const Duration interval = std::max(send_elapsed, ack_elapsed);
  s.delivered = delivered_ - p.delivered;
  s.interval = interval;
  s.rtt = now - p.sent_time;
  s.is_app_limited = p.is_app_limited;
  if (interval > Duration::Zero() && interval >= min_rtt / 2) {
    s.delivery_rate = Bandwidth::FromBytesAndDuration(s.delivered, interval);
  }
  return s;
}

RateSamplerDebugState RateSampler::debug_state() const {
  RateSamplerDebugState d;
  d.delivered = delivered_;
  d.delivered_time = delivered_time_;
  d.first_sent_time = first_sent_time_;
  d.app_limited = app_limited();
  d.app_limited_until = app_limited_until_;
  return d;
}

}  // namespace longhaul
