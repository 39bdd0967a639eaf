// The congestion-controller interface: the connection reports packets sent, acknowledged
// and lost (with delivery-rate samples and ECN-CE counts) and asks for a pacing rate and
// a congestion window. Controllers are pure state machines like the rest of the core:
// time comes in with every call.
//
// Implementations: FixedRateController (dedicated lines: the profile's rate) and, in
// cc/bbr.h, BbrController (model-based, for shared links). docs/congestion-control.md.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/base/units.h"
#include "transport/core/cc/rate_sampler.h"
#include "transport/core/config.h"

namespace longhaul {

class RttEstimator;

struct AckEvent {
  Time now;
  ByteCount bytes_acked = 0;         // newly acknowledged datagram bytes
  ByteCount bytes_in_flight = 0;     // after this ACK
  ByteCount total_delivered = 0;     // connection lifetime
  uint64_t ce_delta = 0;             // new CE marks the peer reported
  uint64_t ect_delta = 0;            // new ECT(0) packets the peer reported
  PacketNumber largest_acked = 0;
  RateSample sample;  // cc/rate_sampler.h
};

struct LossEvent {
  Time now;
  ByteCount bytes_lost = 0;
  uint64_t packets_lost = 0;
  ByteCount bytes_in_flight = 0;     // after removing the lost packets
  Time largest_lost_sent_time;       // send time of the newest lost packet
  bool persistent = false;           // a probe timeout fired (no ACK for a long time)
};

// What a controller believes and does, for tests that assert on behaviour and for tools.
struct CcDebugState {
  const char* mode = "";           // "fixed"; bbr: "startup", "drain", "probe_bw_down",
                                   // "probe_bw_cruise", "probe_bw_up", "probe_rtt"
  Bandwidth bandwidth_estimate;    // bottleneck bandwidth the model uses
  Duration min_rtt;                // the controller's min-RTT estimate (zero if none)
  double pacing_gain = 1.0;
  double cwnd_gain = 1.0;
  double ce_fraction = 0.0;        // CE-marked share of ECN-capable packets, last round
  double loss_rate = 0.0;          // lost / (lost + acknowledged) bytes, last round
  double ecn_alpha = 0.0;          // DCTCP-style smoothed CE fraction
  Bandwidth pacing_rate;           // after the config.rate cap
  ByteCount cwnd = 0;
  uint64_t rounds = 0;             // round trips counted so far
  uint64_t congestion_events = 0;  // loss-driven model reductions
  uint64_t ecn_reductions = 0;     // CE-driven model reductions
  bool full_bw_reached = false;    // startup found the pipe full
  bool competed = false;           // bbr: competed with queue-building traffic (cc_compete)
};

class CongestionController {
 public:
  virtual ~CongestionController() = default;
  virtual void OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                            bool is_app_limited) = 0;
  virtual void OnAck(const AckEvent& ack, const RttEstimator& rtt) = 0;
  virtual void OnLoss(const LossEvent& loss, const RttEstimator& rtt) = 0;
  virtual Bandwidth PacingRate() const = 0;
  virtual ByteCount CongestionWindow() const = 0;
  virtual CcDebugState DebugState() const = 0;
};

// Sends at the configured rate with the configured window; ignores loss. For dedicated
// lines whose rate is known.
class FixedRateController : public CongestionController {
 public:
  explicit FixedRateController(const TransportConfig& config)
      : rate_(config.rate), window_(config.window) {}
  void OnPacketSent(Time, ByteCount, ByteCount, bool) override {}
  void OnAck(const AckEvent&, const RttEstimator&) override {}
  void OnLoss(const LossEvent&, const RttEstimator&) override {}
  Bandwidth PacingRate() const override { return rate_; }
  ByteCount CongestionWindow() const override { return window_; }
  CcDebugState DebugState() const override {
    CcDebugState s;
    s.mode = "fixed";
    s.bandwidth_estimate = rate_;
    s.pacing_rate = rate_;
    s.cwnd = window_;
    return s;
  }

 private:
  Bandwidth rate_;
  ByteCount window_;
};

// The controller config.cc names. `seed` feeds the controller's randomness (BBR's probe
// phase lengths), so a Connection's behaviour depends only on its inputs and seed.
std::unique_ptr<CongestionController> MakeCongestionController(const TransportConfig& config,
                                                               uint64_t seed = 1);

}  // namespace longhaul
