// BbrController: model-based congestion control for shared long-haul links (cc=bbr).
//
// The model (after BBR, tcp_bbr.c and draft-ietf-ccwg-bbr):
//   bottleneck bandwidth  windowed max of per-ACK delivery-rate samples over 10 rounds
//   min RTT               minimum RTT sample, refreshed at least every 10 s
//   BDP                   bandwidth x min RTT
// Pacing rate = pacing_gain x bandwidth (1% below, capped by TransportConfig::rate when
// non-zero); congestion window = cwnd_gain x BDP plus an ACK-aggregation allowance,
// bounded by TransportConfig::window.
//
// States: STARTUP (gain 2.77, doubles per round until the bandwidth grew < 25% for 3
// rounds, or congestion), DRAIN (gain 1/2.77 until in-flight <= BDP), PROBE_BW (a cycle
// DOWN 0.75 -> CRUISE 1.0 for a few rounds -> UP 1.25, UP staying up while the delivery
// rate keeps growing), PROBE_RTT (every 10 s without a new min RTT: cwnd 0.5 x BDP for
// max(200 ms, one round), not the 4 packets of BBRv1, so a 725 MB pipe stays half full).
//
// Congestion response, the long-haul part. Random loss on a long path says nothing about
// the bottleneck, so loss alone does not cut the rate. A loss is congestion when:
//   - it comes with a queue: the RTT at the time of the loss exceeds min RTT by
//     kQueueDelayFraction x min RTT (+ the peer's ACK delay), which the 1.25 probe alone
//     cannot cause (it queues at most 0.25 BDP); or
//   - the round's loss rate exceeds TransportConfig::cc_loss_threshold (at least
//     kMinLossPackets packets), for buffers too shallow to show queueing delay.
// Then, once per round, the bandwidth model is reset to kLossBeta x the delivery rate
// actually achieved in the last rounds (stale samples from before the cut are ignored),
// startup ends, and PROBE_BW goes to DOWN to drain the queue.
// ECN (DCTCP-like): per round the CE fraction F of ECN-capable packets updates
// alpha <- (1 - 1/16) alpha + F/16; a round with CE marks cuts the model by alpha/2.
//
// Thread-safety: none (owned by one Connection). Deterministic for a given seed.
#pragma once

#include <cstdint>

#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/cc/windowed_filter.h"
#include "transport/core/config.h"

namespace longhaul {

// Constants of the algorithm. Defaults are the documented behaviour; tests may change
// them to isolate one mechanism.
struct BbrParams {
  double startup_pacing_gain = 2.77;  // 4 ln 2 (BBRv3); doubles the delivery rate per round
  double startup_cwnd_gain = 2.0;
  double drain_pacing_gain = 1.0 / 2.77;
  double cwnd_gain = 2.0;             // PROBE_BW: 2 x BDP covers ACK delays and the probe
  double probe_up_gain = 1.25;
  double probe_down_gain = 0.75;
  // PROBE_BW rounds at gain 1 between probes: uniform in [min, max]. Short enough that a
  // link whose rate rises is followed within about 10 round trips.
  uint32_t cruise_rounds_min = 2;
  uint32_t cruise_rounds_max = 4;
  // UP continues past its first round while each round's bandwidth grows by this factor.
  double probe_up_growth = 1.1;
  uint32_t max_up_rounds = 30;
  double probe_capacity_share = 0.1;
  double max_probe_gain = 2.0;
  uint32_t bw_window_rounds = 10;
  Duration min_rtt_window = Duration::Seconds(10);
  Duration probe_rtt_duration = Duration::Milliseconds(200);
  double probe_rtt_cwnd_gain = 0.5;
  double full_bw_growth = 1.25;
  uint32_t full_bw_rounds = 3;
  double pacing_margin = 0.01;        // pace this fraction below the estimate
  uint32_t initial_cwnd_packets = 10;
  uint32_t min_cwnd_packets = 4;
  // Congestion classification and response.
  double queue_delay_fraction = 0.3;  // of min RTT; a loss with more queueing is congestion
  uint32_t min_loss_packets = 8;      // a round's loss rate counts from this many losses
  double loss_beta = 0.9;             // model after a congestive loss, x delivery rate
  double ecn_gain = 1.0 / 16;         // DCTCP g
  double ecn_alpha_init = 1.0;        // DCTCP starts conservative (RFC 8257)
  double startup_ce_exit = 0.1;       // CE fraction of a startup round that ends startup
  bool reset_from_since_congestion = true;
  double standing_queue_fraction = 0.15;
  double standing_queue_beta = 1.0;
  uint32_t standing_queue_rounds = 8;
  double gradient_deadband = 0.02;
  bool standing_queue_down = true;
  bool up_assess = false;
  bool down_until_empty = false;
  double down_max_rtts = 1.0;
  double probe_success_gain = 0;
  double probe_success_fraction = 0.4;
  double binomial_c = 0;
  double standing_queue_drain_gain = 0.75;
  double deep_drain_max_rtts = 1.0;
  bool reset_from_avg = false;
};

class BbrController : public CongestionController {
 public:
  enum class Mode { kStartup, kDrain, kProbeBw, kProbeRtt };
  enum class Phase { kDown, kCruise, kUp };  // PROBE_BW cycle

  explicit BbrController(const TransportConfig& config, uint64_t seed = 1,
                         BbrParams params = BbrParams());

  void OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                    bool is_app_limited) override;
  void OnAck(const AckEvent& ack, const RttEstimator& rtt) override;
  void OnLoss(const LossEvent& loss, const RttEstimator& rtt) override;
  Bandwidth PacingRate() const override;
  ByteCount CongestionWindow() const override { return cwnd_; }
  CcDebugState DebugState() const override;

  // ---- introspection (tests) ----
  Mode mode() const { return mode_; }
  Phase phase() const { return phase_; }
  const char* ModeName() const;
  // Bandwidth the model uses (zero before the first sample).
  Bandwidth bandwidth() const { return max_bw_.Get(); }
  Duration min_rtt() const { return min_rtt_; }
  ByteCount Bdp(double gain = 1.0) const;
  double pacing_gain() const { return pacing_gain_; }
  double cwnd_gain() const { return cwnd_gain_; }
  bool full_bw_reached() const { return full_bw_reached_; }
  uint64_t round_count() const { return round_count_; }
  uint64_t congestion_events() const { return congestion_events_; }
  uint64_t ecn_reductions() const { return ecn_reductions_; }
  uint64_t queue_resets() const { return queue_resets_; }
  double ecn_alpha() const { return ecn_alpha_; }
  double last_round_loss_rate() const { return last_loss_rate_; }
  double last_round_ce_fraction() const { return last_ce_fraction_; }
  const BbrParams& params() const { return params_; }

 private:
  enum class Signal { kLossWithQueue, kLossRate, kEcn, kStandingQueue };

  void StartRound(const AckEvent& ack);
  void EndRound(Time now);
  void MeasureRound(Time now);
  double ProbeGain() const;
  Bandwidth RecentDeliveryRate(Time now) const;
  void UpdateMinRtt(Time now, Duration rtt);
  void UpdateBandwidth(const AckEvent& ack, ByteCount prior_delivered);
  void CheckFullPipe();
  void UpdateMode(const AckEvent& ack);
  void EnterProbeBw(Time now, Phase phase);
  void EnterPhase(Time now, Phase phase);
  void ScheduleProbe();
  void EnterProbeRtt(Time now);
  void ExitProbeRtt(Time now);
  void Congestion(Time now, Signal signal, double factor);
  void UpdatePacingRate();
  void UpdateCwnd(ByteCount bytes_acked);
  ByteCount TargetCwnd(double gain) const;
  ByteCount MinCwnd() const { return params_.min_cwnd_packets * max_datagram_; }

  BbrParams params_;
  Rng rng_;
  ByteCount max_datagram_;
  ByteCount window_limit_;   // TransportConfig::window
  Bandwidth rate_cap_;       // TransportConfig::rate; zero = none
  double loss_threshold_;    // TransportConfig::cc_loss_threshold
  Duration ack_delay_;       // TransportConfig::max_ack_delay (the peer's, assumed equal)
  ByteCount ack_allowance_;  // cwnd extra for ACK aggregation

  Mode mode_ = Mode::kStartup;
  Phase phase_ = Phase::kCruise;
  double pacing_gain_;
  double cwnd_gain_;
  Bandwidth pacing_rate_;
  ByteCount cwnd_;
  ByteCount bytes_in_flight_ = 0;
  ByteCount total_delivered_ = 0;

  // Model.
  MaxFilter<Bandwidth> max_bw_;
  Duration min_rtt_ = Duration::Infinite();
  Time min_rtt_stamp_;
  Duration initial_rtt_;
  ByteCount bw_valid_from_delivered_ = 0;  // samples of packets sent earlier are stale

  // Rounds: a round ends when a packet sent after the previous round's end is acked.
  uint64_t round_count_ = 0;
  ByteCount next_round_delivered_ = 0;
  bool round_start_ = false;
  // This round's accounting.
  ByteCount round_acked_ = 0;
  ByteCount round_lost_ = 0;
  uint64_t round_lost_packets_ = 0;
  uint64_t round_ce_ = 0;
  uint64_t round_ect_ = 0;
  Bandwidth round_max_rate_;   // largest delivery-rate sample this round
  Bandwidth prev_round_max_rate_;
  Bandwidth max_rate_since_congestion_;
  double last_loss_rate_ = 0;
  double last_ce_fraction_ = 0;
  double ecn_alpha_;

  // Startup.
  bool full_bw_reached_ = false;
  Bandwidth full_bw_;
  uint32_t full_bw_count_ = 0;

  // PROBE_BW.
  Time phase_start_;
  uint64_t phase_start_round_ = 0;
  uint64_t next_probe_round_ = 0;
  Bandwidth up_base_rate_;     // delivery rate a probing round must beat to continue
  // Largest pacing gain used while sending the current and the previous round, and that
  // of the round whose packets the last completed round acknowledged.
  double sent_gain_cur_ = 1.0;
  double sent_gain_prev_ = 1.0;
  double assessed_gain_ = 1.0;
  double assessed_gain_before_ = 1.0;
  Time round_start_time_;
  ByteCount round_sent_ = 0;
  Bandwidth pair_sent_next_;   // sending rate of the round being acknowledged
  Bandwidth pair_sent_;        // (sent, delivered) of the round before it
  Bandwidth pair_delivered_;
  Bandwidth capacity_;         // estimated bottleneck capacity (zero: unknown)

  // PROBE_RTT.
  Time probe_rtt_done_ = Time::Infinite();
  bool probe_rtt_round_done_ = false;
  ByteCount prior_cwnd_ = 0;

  // Congestion responses.
  uint64_t last_congestion_round_ = ~uint64_t{0};
  Time last_congestion_time_;
  uint64_t congestion_events_ = 0;
  uint64_t ecn_reductions_ = 0;
  uint64_t queue_resets_ = 0;
  Duration round_min_rtt_ = Duration::Infinite();
  Duration latest_rtt_;
  bool probe_succeeded_ = false;
  bool deep_drain_ = false;
  double up_gain_ = 1.25;
  double round_rtt_sum_ns_ = 0;
  uint64_t round_rtt_count_ = 0;
  double prev_round_mean_rtt_ns_ = 0;
  uint64_t gradient_scalings_ = 0;
};

}  // namespace longhaul
