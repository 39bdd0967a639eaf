// LossDetector: decides which sent packets are lost and when the probe timer fires.
//
// RACK-style time and reorder thresholds (RFC 9002 section 6.1, RFC 8985): once a later
// packet is acknowledged, an outstanding packet is lost when
//   largest_acked - pn >= reorder_packets            (packet threshold), or
//   sent_time + (1 + reorder_rtt_fraction) x max(srtt, latest RTT) <= now  (time).
// Both tests are monotone in the packet number, so the lost packets are a prefix of the
// outstanding ones below the largest acknowledged: DetectLosses walks from the oldest
// outstanding packet and stops at the first one that is not (yet) lost, arming the loss
// timer for when it will be. FEC-protected packets get their block's span on top (in
// packets, and in time: the span's wire time plus the flush deadline), so a block is
// given the chance to be decoded before its packets are resent.
//
// Spurious losses: a late ACK of a packet declared lost doubles the packet threshold
// (up to kMaxReorderPackets) and adds the configured reorder_rtt_fraction to the time
// threshold (up to 1), as RACK widens its reordering window on DSACK.
//
// Probe timeout (RFC 9002 section 6.2): srtt + max(4 rttvar, kGranularity) +
// max_ack_delay, at least min_pto and at most max_pto, counted from the last
// ack-eliciting packet sent. When it fires the sender sends kProbesPerTimeout probe
// packets that ignore pacing and the window. Unlike RFC 9002 the period does not double
// per consecutive timeout: through a blackout of seconds the doubling left the sender
// silent for seconds after the path came back (a 5 s outage at 58 ms: full rate 3.7 s
// after its end; without it 2-3 round trips, docs/reliability.md), while the probes it
// saves cost two packets a period. Consecutive timeouts are still counted (pto_backoff),
// and an ACK that acknowledges anything new resets the count.
//
// The detector owns the thresholds, the largest acknowledged packet number, the loss
// timer and the PTO backoff; the caller owns the sent-packet table, the RTT estimator
// and everything a loss implies (bytes in flight, retransmission, congestion control),
// which it does in DetectLosses' callback. Pure state machine: every call takes `now`.
// Not thread-safe; owned by the Connection. Model: QUICHE's GeneralLossAlgorithm,
// quinn-proto's detect_lost_packets / pto_time_and_space, ngtcp2's conn_detect_lost.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "transport/base/units.h"
#include "transport/core/config.h"
#include "transport/core/loss/rtt_estimator.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {

// What the detector believes, for tests and debugging.
struct LossDetectorDebugState {
  uint32_t reorder_packets = 0;     // current packet threshold (widens on spurious loss)
  double reorder_rtt_fraction = 0;  // current time threshold, fraction of the RTT
  uint32_t pto_backoff = 0;         // consecutive probe timeouts without new ACKs
  uint32_t probes_pending = 0;      // probe packets still to send after a timeout
  bool has_largest_acked = false;
  PacketNumber largest_acked = 0;
  Time loss_time = Time::Infinite();  // when the oldest outstanding packet turns lost
};

class LossDetector {
 public:
  // Timer granularity assumed for the loss and probe timers.
  static constexpr Duration kGranularity = Duration::Microseconds(100);
  // Upper bound of the adaptive packet-reorder threshold.
  static constexpr uint32_t kMaxReorderPackets = 1u << 16;
  // Probe packets sent per probe timeout.
  static constexpr uint32_t kProbesPerTimeout = 2;

  // Uses reorder_packets, reorder_rtt_fraction, min_pto, max_pto, max_ack_delay and
  // fec_flush of `config` (which must Validate()).
  explicit LossDetector(const TransportConfig& config);

  // ---- ACKs ----
  // An ACK frame with this largest packet number was processed; `newly_acked`: it
  // acknowledged at least one packet for the first time (resets the PTO backoff).
  void OnAckReceived(PacketNumber largest, bool newly_acked);
  // A packet declared lost was acknowledged after all: widen both thresholds.
  void OnSpuriousLoss();
  PacketNumber largest_acked() const { return largest_acked_; }  // 0 before the first ACK
  bool has_largest_acked() const { return has_largest_acked_; }

  // ---- loss detection ----
  // How long after its send time a packet (not FEC-protected) below the largest
  // acknowledged one is declared lost: (1 + fraction) x max(srtt, latest), at least
  // kGranularity.
  Duration LossDelay(const RttEstimator& rtt) const;

  // The extra allowance of FEC-protected packets (SentPacket::fec_member): the packets a
  // block spans on the wire, and the time those take at the current pacing rate. The
  // flush deadline (config fec_flush) is added to the time.
  struct FecSpan {
    uint32_t packets = 0;
    Duration wire_time;
  };
  // Declares lost every outstanding packet of `sent` that meets a threshold, oldest
  // first: marks it lost and finished in the table, then calls `on_lost(pn, packet)`.
  // Re-arms loss_time(). Nothing is lost before the first ACK.
  void DetectLosses(Time now, const RttEstimator& rtt, const FecSpan& fec, SentPacketTable* sent,
                    absl::FunctionRef<void(PacketNumber, SentPacket&)> on_lost);
  // When DetectLosses should run again (the oldest outstanding packet below the largest
  // acknowledged reaches its time threshold); Infinite if none.
  Time loss_time() const { return loss_time_; }

  // ---- probe timeout ----
  // The probe timeout period.
  Duration PtoPeriod(const RttEstimator& rtt) const;
  // When the probe timer fires, given the send time of the last ack-eliciting packet.
  // The caller arms it only while bytes are in flight.
  Time PtoTime(Time last_ack_eliciting_sent, const RttEstimator& rtt) const {
    return last_ack_eliciting_sent + PtoPeriod(rtt);
  }
  // The probe timer fired: count it and ask for kProbesPerTimeout probe packets.
  void OnPtoFired();
  uint32_t probes_pending() const { return probes_pending_; }
  // A probe packet was sent.
  void OnProbeSent() {
    if (probes_pending_ > 0) --probes_pending_;
  }

  LossDetectorDebugState debug_state() const;

 private:
  // Configuration.
  const double base_reorder_fraction_;
  const Duration min_pto_;
  const Duration max_pto_;
  const Duration max_ack_delay_;
  const Duration fec_flush_;

  // Adaptive thresholds.
  uint32_t reorder_packets_;
  double reorder_fraction_;

  PacketNumber largest_acked_ = 0;
  bool has_largest_acked_ = false;
  Time loss_time_ = Time::Infinite();
  uint32_t pto_backoff_ = 0;
  uint32_t probes_pending_ = 0;
};

}  // namespace longhaul
