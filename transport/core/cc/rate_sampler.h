// RateSampler: per-ACK delivery-rate samples for the congestion controller, after
// draft-cheng-iccrg-delivery-rate-estimation (the estimator of Linux TCP and BBR).
//
// The connection-wide state is `delivered` (bytes of in-flight packets acknowledged so
// far), `delivered_time` (when an ACK last acknowledged something new) and
// `first_sent_time` (the send time of the packet the current sampling interval starts
// at). Every packet counted in flight is stamped with them when it is sent; when it is
// acknowledged, the bytes delivered since it was sent, over
//   interval = max(send_elapsed, ack_elapsed)
//   send_elapsed = packet.sent_time - packet.first_sent_time
//   ack_elapsed  = delivered_time - packet.delivered_time
// give the rate. Taking the larger of the two elapsed times keeps ACK compression (a
// burst of ACKs) from inflating the rate. An interval shorter than min RTT / 2 gives no
// rate (too short to mean anything). A flight that starts from nothing in flight starts
// a new interval (first_sent_time and delivered_time = now).
//
// One sample per ACK frame, from the first in-flight packet the ACK's walk meets: the
// ranges are walked from the highest, each from its low end, so it is the oldest newly
// acknowledged packet of the highest range, one of the most recently sent.
//
// App-limited: when the sender runs out of data, every packet sent until what is in
// flight then has been delivered is marked app-limited, and so are the samples they give
// (the controller must not take a low app-limited rate as the path's).
//
// Pure state machine (time comes in with every call); not thread-safe; owned by the
// Connection. Model: ngtcp2's rst (ngtcp2_rst.c), QUICHE's BandwidthSampler.
#pragma once

#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

struct SentPacket;

// A delivery-rate sample, taken when an ACK frame acknowledges in-flight packets.
struct RateSample {
  Bandwidth delivery_rate;      // zero if no valid sample
  ByteCount delivered = 0;      // bytes delivered over the sample interval
  Duration interval;            // sample interval
  Duration rtt;                 // RTT of the packet the sample came from
  bool is_app_limited = false;  // the sender had nothing to send at the time
};

// The sampler's connection-wide state, for tests and debugging.
struct RateSamplerDebugState {
  ByteCount delivered = 0;          // bytes of in-flight packets acknowledged so far
  Time delivered_time;              // when an ACK last acknowledged something new
  Time first_sent_time;             // start of the current sampling interval (a send time)
  bool app_limited = false;         // packets sent now are marked app-limited
  ByteCount app_limited_until = 0;  // ... until `delivered` reaches this (0: not limited)
};

class RateSampler {
 public:
  // `now`: the connection's creation time (the first interval's start).
  explicit RateSampler(Time now) : delivered_time_(now), first_sent_time_(now) {}

  // ---- sending ----
  // A packet that counts in flight is sent at `now`; `bytes_in_flight` is what was in
  // flight before it. Stamps the packet's delivery state (delivered, delivered_time,
  // first_sent_time, is_app_limited).
  void OnPacketSent(Time now, ByteCount bytes_in_flight, SentPacket* packet);
  // The sender has nothing to send: packets sent from now until what is in flight has
  // been delivered are app-limited.
  void OnAppLimited(ByteCount bytes_in_flight);
  bool app_limited() const { return app_limited_until_ > 0; }

  // ---- one ACK frame: BeginAck, OnPacketAcked per packet, EndAck, GenerateSample ----
  void BeginAck() { have_sample_packet_ = false; }
  // An in-flight packet is acknowledged for the first time, in the order the ACK's
  // ranges are walked. `newly_delivered`: it was still outstanding (neither lost nor
  // acknowledged before), so its bytes count as delivered.
  void OnPacketAcked(const SentPacket& packet, bool newly_delivered);
  // The ACK's ranges are walked; `any_newly_acked`: it acknowledged anything new.
  void EndAck(Time now, bool any_newly_acked);
  // The ACK's sample (default, with a zero rate, when it acknowledged no in-flight
  // packet). Starts the next interval at the sampled packet's send time. At most once
  // per ACK; the caller may skip it for an ACK it does not report to the controller.
  RateSample GenerateSample(Time now, Duration min_rtt);

  ByteCount delivered() const { return delivered_; }
  RateSamplerDebugState debug_state() const;

 private:
  // The delivery state stamped into a packet when it was sent.
  struct PacketState {
    Time sent_time;
    Time first_sent_time;
    Time delivered_time;
    ByteCount delivered = 0;
    bool is_app_limited = false;
  };

  ByteCount delivered_ = 0;
  Time delivered_time_;
  Time first_sent_time_;
  ByteCount app_limited_until_ = 0;
  // The packet this ACK's sample comes from.
  bool have_sample_packet_ = false;
  PacketState sample_packet_;
};

}  // namespace longhaul
