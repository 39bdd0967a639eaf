// An analytic model of longhaul's goodput and message completion time on a link, for
// one TransportConfig: selective repeat with RACK-style detection and tail protection,
// FEC(k, m) with interleaving, segment size (header overhead), window and receive window
// (flight-size limits), and pacing (a fixed rate; above the bottleneck it fills the
// queue and drops the excess). docs/tuning.md derives every term; in short:
//
//   per data packet on the wire   W = segment + packet/frame headers + IP/UDP
//                                 (+ m/k repair packets of a block's shard size)
//   sending rate                  P' = min(pacing rate, window / RTT_eff,
//                                      receive-window limit incl. stalls behind holes)
//   steady goodput                segment / W x min(P' x (1 - retransmitted), C)
//   finite bulk transfer          bytes / goodput + one-way delay + E[tail repair]
//   message completion            one-way + serialisation + the p99 / mean of the largest
//                                 repair delay over the message's packets
//
// Loss is a Gilbert chain (fec::GilbertModel) fitted to (loss, mean burst); FEC block
// failure comes from the FEC library's loss-count recursion over the interleaved chain
// (fec::BlockFailureByParity), the same model its auto policy uses. A repair by
// selective repeat costs the detection delay (packet threshold: reorder_packets later
// packets acknowledged; time threshold: (1 + reorder_rtt_fraction) x RTT) plus one
// retransmission; a tail-protection copy repairs the newest packets of a burst after a
// delay equal to their distance from its end.
//
// What it ignores (hence the tolerances in tests/unit/tuner/model_test.cc): correlation
// of losses across a tail beyond the burst model, spurious retransmissions from
// reordering (the thresholds adapt within a few events), CPU limits, and the transient
// of the first RTT.
//
// Pure function of values; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/core/config.h"
#include "tuner/model/link_estimate.h"

namespace longhaul::tuner {

enum class Objective {
  kGoodput,  // bulk transfer: maximise goodput
  kMct,      // messages: minimise the p99 message completion time
};
const char* ObjectiveName(Objective o);
absl::StatusOr<Objective> ParseObjective(absl::string_view text);

struct Workload {
  Objective objective = Objective::kGoodput;
  // bulk: bytes of one transfer; 0 = an unbounded transfer (steady state only).
  ByteCount bulk_bytes = 0;
  ByteCount chunk = ByteCount{16} << 20;  // bulk: the messages the stream is cut into
  // mct: message size and offered load (fraction of the link rate, open loop).
  ByteCount message_size = ByteCount{1} << 20;
  double load = 0.5;
  uint64_t messages = 1000;  // mct: how many (an overloaded link's backlog grows with it)
};

struct Prediction {
  // ---- goodput ----
  double steady_goodput_bps = 0;  // message bytes/s of an unbounded transfer, x 8
  double goodput_bps = 0;         // of the workload (bulk_bytes; steady if 0)
  double transfer_s = 0;          // bulk_bytes: first send to last delivery
  std::string limit;              // "link", "pacing", "window", "receive window"
  double send_rate_bps = 0;       // wire rate the sender keeps up (after flight limits)
  double window_limit_bps = 0;    // wire rate the window allows
  double recv_window_limit_bps = 0;
  double header_efficiency = 0;   // segment / wire bytes of a data packet
  double fec_overhead = 0;        // repair wire bytes per data wire byte
  double retransmitted = 0;       // fraction of data packets that are repeats
  // ---- loss and repair ----
  double loss = 0;                // per packet at the bottleneck (random + queue)
  double residual_loss = 0;       // per data packet after FEC (= loss without FEC)
  double block_failure = 0;       // P(an FEC block is not recoverable)
  double rtt_effective_s = 0;     // median RTT with queueing and ACK delay
  double repair_s = 0;            // a selective-repeat repair (detection + one way)
  double tail_s = 0;              // expected extra time at the end of a bulk transfer
  ByteCount window_needed = 0;    // rate x (p99 RTT + repair time), datagram bytes
  ByteCount recv_window_needed = 0;  // message bytes to ride out one repair
  // ---- messages ----
  bool stable = true;             // the offered load can be served
  double mct_ideal_s = 0;         // as the simulator defines it (rtt/2 + bytes at rate)
  double mct_base_s = 0;          // without loss
  double mct_mean_s = 0;
  double mct_p50_s = 0;
  double mct_p99_s = 0;
  double p_message_repair = 0;    // P(a message needs a selective-repeat repair)

  // The objective as "larger is better": goodput_bps, or -mct_p99_s.
  double Score(Objective o) const;
  std::string ToString(Objective o) const;
};

Prediction Predict(const LinkEstimate& link, const TransportConfig& config,
                   const Workload& workload);

// Wire bytes of a full data packet (segment + headers + link overhead) for `config`.
ByteCount DataPacketWireBytes(const TransportConfig& config, ByteCount link_overhead);

}  // namespace longhaul::tuner
