// The FEC auto policy: from loss statistics and the workload, choose the block size k,
// the parity count m and the interleave depth D, or turn FEC off.
//
// Goal: the expected number of repair round trips per message stays far below one,
//   E[unrecoverable blocks per message] = sum over the message's blocks of
//                                         P(block loses more than m of its k'+m shards)
//                                       <= target (default 1e-3),
// at the least parity overhead m * blocks / packets. Each unrecoverable block costs one
// selective-repeat round (RTT + NACK delay), which on a 58 ms link is what FEC exists to
// avoid; the overhead is bandwidth.
//
// Model (docs/fec.md): losses follow a Gilbert chain fitted to (loss rate p, mean burst
// b) (loss_model.h). A block's shards are D packets apart (interleaving, parity sent
// round-robin across blocks), so a block sees the D-step chain. A message of N packets
// starting a fresh interleave group fills floor(N / (D k)) groups of D full blocks; the
// remainder closes as up to D shortened blocks at the message end. Blocks are treated as
// independent (the union bound above, conservative).
//
// Search: D in {1, 2, 4, ...} <= max_interleave, k in a fixed ladder within
// [min_k, max_k], m in 1..max_m; the smallest m meeting the target for each (k, D), then
// the least overhead; ties prefer the shallower interleave (less latency and receiver
// memory), then the smaller failure rate, then the larger k. Candidates above
// max_overhead are not considered. If nothing meets the target, the most protective
// candidate within the limits is returned with reason kBestEffort.
// FEC is off when p < loss_floor (kCleanLink), when a message without FEC already
// meets the target, or when retransmission is the cheaper repair (kNotNeeded; see
// repair_cost).
//
// Pure function of its input; thread-safe. A few hundred microseconds per call.
#pragma once

#include <cstdint>

namespace longhaul::fec {

struct FecPolicyInput {
  // ---- link, as measured (receiver loss reports or the tuner's probe) ----
  double loss_rate = 0.0;   // long-run fraction of packets lost, [0, 0.5]
  double mean_burst = 1.0;  // mean length of a run of consecutive losses, packets (>= 1)

  // ---- workload ----
  // Data packets per message: the unit for which repair rounds are counted and the
  // point where blocks close early. 0: use window_packets; both 0: kDefaultMessagePackets.
  uint64_t packets_per_message = 0;
  // Packets the sender may have in flight; a group of D blocks (D * (k + m) packets)
  // must fit. 0: no bound.
  uint64_t window_packets = 0;

  // ---- limits ----
  uint32_t min_k = 1;
  uint32_t max_k = 32;  // TransportConfig::fec_k; decode cost per lost byte grows with k
  uint32_t max_m = 16;
  uint32_t max_interleave = 64;
  // Most parity per data packet worth paying (m * blocks / N); beyond it retransmission
  // is the cheaper repair (long bursts in short messages).
  double max_overhead = 0.5;

  // ---- goal ----
  double target_repairs_per_message = 1e-3;
  // What a repair round (about a round trip: detection, resend, delivery) costs, as a
  // multiple of a message's ideal completion time (0: unknown). A resend is itself lost
  // with probability p, so the tail sees as many rounds as it takes until a message
  // needing more is rarer than the target. Where a message repaired in those rounds still
  // completes within tail_slack of its ideal, and the repairs add at most mean_slack to
  // the mean, or no more than the chosen parity's overhead would (each repair also
  // delaying `messages_behind` messages submitted after it), retransmission alone is the
  // better repair: FEC is not needed (messages many round trips long).
  double repair_cost = 0.0;
  double messages_behind = 0.0;
  // Without FEC, a lost packet delays its message only if it is among the message's last
  // `exposed_packets` (about a round trip of packets at the pacing rate): an earlier one
  // is resent and delivered while the rest of the message is still being sent. 0: every
  // packet counts. Only the repairs of exposed packets are counted against repair_cost.
  double exposed_packets = 0.0;
  // Serialisation's share of a message's ideal completion time (0: unknown). Parity
  // lengthens every message by overhead x this share: the overhead considered is capped
  // where that alone would put every message past 0.9 x tail_slack (large messages on
  // slow links), and what the cap leaves unmet is best-effort; unless even the most
  // protective code within the cap leaves more than 4 x the target in repairs (the
  // tail's share of messages), where repair rounds would cost the tail more than the
  // longer messages do and the search goes up to max_overhead.
  double serialisation_share = 0.0;
  // The loss rate is an upper bound from few loss events (or none), not a measurement:
  // parity stays within the cap above whatever it leaves in repairs (a certain cost to
  // every message is not paid for a loss rate that may not exist).
  bool loss_is_bound = false;
  double tail_slack = 0.15;
  double mean_slack = 0.05;
  // Below this loss rate FEC is off: the estimate is noise and repairs are rare.
  double loss_floor = 1e-6;

  static constexpr uint64_t kDefaultMessagePackets = 8192;  // 64 MiB of 8 KiB segments
};

enum class FecPolicyReason {
  kCleanLink,    // loss below the floor
  kNotNeeded,    // without FEC a message already meets the target (or repairs are cheap)
  kMeetsTarget,  // chosen (k, m, D) meets the target at least overhead
  kBestEffort,   // nothing within the limits meets the target; most protective choice
  kOverLimits,   // no (k, m, D) fits the limits at all (e.g. a one-packet message): off
};
// A short name for logs ("clean-link", "meets-target", ...); the FecSender logs each
// change of the auto policy's choice with it at VLOG(1).
const char* FecPolicyReasonName(FecPolicyReason reason);

struct FecPolicyDecision {
  bool enabled = false;
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t interleave = 1;
  FecPolicyReason reason = FecPolicyReason::kCleanLink;

  // The model's view of the choice (also filled, for the no-FEC case, when off).
  uint64_t message_packets = 0;       // N used
  uint64_t blocks_per_message = 0;    // full + shortened
  double overhead = 0.0;              // parity packets / data packets per message
  double block_failure = 0.0;         // P(a full k-block is unrecoverable)
  double repairs_per_message = 0.0;   // expected unrecoverable blocks per message
  double repairs_without_fec = 0.0;   // P(a message loses any packet) with FEC off
  uint32_t candidates_evaluated = 0;  // (k, m, D) combinations scored
};

FecPolicyDecision ChooseFecParameters(const FecPolicyInput& input);

}  // namespace longhaul::fec
