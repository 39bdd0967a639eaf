// BbrController: model-based congestion control for shared long-haul links (cc=bbr).
//
// The model (after BBR: tcp_bbr.c, draft-ietf-ccwg-bbr):
//   bottleneck bandwidth  windowed max of per-ACK delivery-rate samples over 10 rounds
//   min RTT               smallest RTT sample, refreshed at least every 10 s
//   BDP                   bandwidth x min RTT
//   (TransportConfig::rate_min: the bandwidth is at least that, from the start)
// Pacing rate = pacing_gain x bandwidth, 1% below the estimate and capped by
// TransportConfig::rate when that is non-zero. Congestion window = cwnd_gain (2) x BDP
// plus an allowance for ACK aggregation, bounded by TransportConfig::window.
//
// States:
//   STARTUP    gain 2.77 (4 ln 2); ends when the bandwidth grew < 25% in 3 rounds, on a
//              round whose loss rate exceeds cc_loss_threshold, or on CE marks
//   DRAIN      gain 1/2.77 until in flight <= BDP
//   PROBE_BW   a cycle DOWN (0.75) -> CRUISE (1.0, 2-4 rounds) -> UP (the fair probe,
//              1.05-1.75); UP goes on while the bandwidth keeps growing, faster (1.5) on
//              an empty queue, so a link whose rate went up is filled within a few rounds
//   PROBE_RTT  after 10 s without an RTT sample within 1% of min RTT: cwnd 0.5 x BDP (not
//              BBRv1's 4 packets: a 725 MB pipe stays half full) for max(200 ms, a round)
//
// Congestion response, the long-haul part: random loss does not cut the rate. Loss with
// a queue, a round's loss rate above cc_loss_threshold, a standing queue and ECN marks
// (DCTCP-like) are congestion, answered once per round by restarting the bandwidth model
// from the rate the path delivered lately and draining. A path whose RTT went up is taken
// as the path's after drains that cannot empty it. Sharing with traffic that keeps a
// queue (TCP CUBIC or BBR), the flow competes (cc_compete) or yields (cc_yield).
//
// One file per concern, each with its reasons at the top:
//   bbr.cc            construction, the ACK/loss entry points, rounds
//   bbr_model.cc      bandwidth and min-RTT filters, BDP, pacing rate, window
//   bbr_startup.cc, bbr_drain.cc, bbr_probe_bw.cc, bbr_probe_rtt.cc   the modes
//   bbr_congestion.cc loss and standing-queue responses, path change, the model cut
//   bbr_ecn.cc        the DCTCP-like ECN response
//   bbr_compete.cc    competing with queue-building traffic, its CUBIC bound
//   bbr_params.h      BbrParams, grouped the same way
// docs/congestion-control.md has the reasons and the measurements.
// Thread-safety: none (owned by one Connection). Deterministic for a given seed.
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/core/cc/bbr_params.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/cc/windowed_filter.h"
#include "transport/core/config.h"

namespace longhaul {

class BbrController : public CongestionController {
 public:
  enum class Mode { kStartup, kDrain, kProbeBw, kProbeRtt };
  enum class Phase { kDown, kCruise, kUp };  // PROBE_BW cycle

  explicit BbrController(const TransportConfig& config, uint64_t seed = 1,
                         BbrParams params = BbrParams());

  void OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                    bool is_app_limited) override;
  void OnAck(const AckEvent& ack, const RttEstimator& rtt) override;
  void OnLoss(const LossEvent& loss, const RttEstimator& rtt) override;  // bbr_congestion.cc
  Bandwidth PacingRate() const override;
  ByteCount CongestionWindow() const override { return cwnd_; }
  CcDebugState DebugState() const override;

  // ---- introspection (tests) ----
  Mode mode() const { return mode_; }
  Phase phase() const { return phase_; }
  const char* ModeName() const;
  // The model's bandwidth: the max filter, at least rate_min (zero before the first
  // sample without rate_min).
  // While competing after an overflow episode, no more than CUBIC's window would have
  // grown back to since.
  Bandwidth bandwidth() const {
    const Bandwidth bw =
        episode_bound_.IsZero() ? max_bw_.Get() : std::min(max_bw_.Get(), episode_bound_);
    return std::max(bw, rate_min_);
  }
  Duration min_rtt() const { return min_rtt_; }  // infinite before the first sample
  ByteCount Bdp(double gain = 1.0) const;
  double pacing_gain() const { return pacing_gain_; }
  bool full_bw_reached() const { return full_bw_reached_; }
  uint64_t congestion_events() const { return congestion_events_; }  // loss-driven
  uint64_t queue_drains() const { return queue_drains_; }            // standing queue
  uint64_t ecn_reductions() const { return ecn_reductions_; }
  uint64_t path_rtt_changes() const { return path_rtt_changes_; }  // min RTT re-anchored
  // Probes that found nothing and queued their own excess (probe_bw.found_share), and the
  // scale of the next probe's excess over BBR's (1: the fair probe).
  uint64_t probe_backoffs() const { return probe_backoffs_; }
  double probe_scale() const { return probe_scale_; }
  // Competing with traffic that keeps a queue (no queue-based cuts until the queue is
  // seen empty again); how many times it started.
  bool competing() const { return competing_; }
  uint64_t competing_entries() const { return competing_entries_; }
  double ecn_alpha() const { return ecn_alpha_; }
  double last_round_loss_rate() const { return last_loss_rate_; }
  double last_round_ce_fraction() const { return last_ce_fraction_; }
  // The gain the next UP phase would start with.
  double ProbeGain() const;
  double FairGain() const;

 private:
  // The excess of the probe's last min RTT queued: the RTT rose by own_queue_share of
  // it, times `seen` (the part of it acknowledged so far).
  bool LastProbeRoundQueued(double seen) const;
  bool DrainsOwnProbeExcess(Time now) const;
  // How long the drain takes out what the probe sent in excess (capped).
  Duration ProbeDrainTime() const;
  // The round that acknowledged the probe delivered more than the round before it by
  // found_share of what the probe asked for.
  bool ProbeFoundMore() const;
  // `round` (a round count, ~0 for never) is within the bandwidth filter's window.
  bool WithinBwWindow(uint64_t round) const;
  enum class Signal { kLossWithQueue, kLossRate, kStandingQueue, kEcn };

  // bbr.cc: rounds.
  void StartRound(const AckEvent& ack);
  void EndRound(Time now);
  void ResetRoundCounters();
  // bbr_model.cc.
  void UpdateMinRtt(Time now, Duration rtt);
  void UpdateBandwidth(const AckEvent& ack, ByteCount prior_delivered);
  Bandwidth RecentDeliveryRate(Time now) const;
  void UpdatePacingRate();
  void UpdateCwnd(ByteCount bytes_acked);
  ByteCount TargetCwnd(double gain) const { return Bdp(gain) + ack_allowance_; }
  ByteCount MinCwnd() const { return params_.model.min_cwnd_packets * max_datagram_; }
  // The queue is (nearly) empty: the latest RTT is within 5% of min RTT (+ ACK delay).
  bool QueueEmpty() const;
  double PacketsPerMinRtt(Bandwidth bw) const;  // 0 before an RTT sample
  // The modes: bbr_startup.cc, bbr_drain.cc, bbr_probe_bw.cc, bbr_probe_rtt.cc.
  void UpdateMode(const AckEvent& ack);
  void CheckFullPipe();
  void UpdateStartup(const AckEvent& ack);
  void EnterDrain(Time now);
  void UpdateDrain(Time now);
  void UpdateProbeBw(Time now);
  void UpdateProbeUp(Time now);
  void EnterProbeBw(Time now, Phase phase);
  void EnterPhase(Time now, Phase phase);
  void ScheduleProbe();
  void JudgeProbe(Time now);
  void UpdateProbeRtt(Time now);
  void EnterProbeRtt(Time now);
  void ExitProbeRtt(Time now);
  // bbr_congestion.cc: the signals of a finished round, and the response to them.
  void RespondToRound(Time now, bool sent_at_gain_1);
  // A standing queue at the end of a round: a drain, or the path's new RTT.
  void StandingQueue(Time now, bool app_limited);
  void Congestion(Time now, Signal signal, double factor);
  // bbr_ecn.cc.
  void UpdateEcnAlpha();
  void RespondToEcn(Time now, bool sent_at_gain_1);
  // bbr_compete.cc.
  void NoteRoundQueue(Time now);  // whether the round saw the queue empty
  // Whether a queue response starts competing, and why.
  enum class Entry {
    kNone,
    kRecent,      // a competitor seen within the min-RTT window is back
    kPersistent,  // the queue stood through responses spread over after_rounds
  };
  Entry NoteQueueResponse(Time now);
  void StartCompeting(Time now, Entry why);
  void OverflowEpisode(Time now);
  Bandwidth EpisodeBound(Time now) const;

  BbrParams params_;
  Rng rng_;
  ByteCount max_datagram_;
  ByteCount window_limit_;   // TransportConfig::window
  Bandwidth rate_cap_;       // TransportConfig::rate; zero = none
  Bandwidth rate_min_;       // TransportConfig::rate_min; zero = none
  double loss_threshold_;    // TransportConfig::cc_loss_threshold
  bool compete_;             // TransportConfig::cc_compete
  bool yield_;               // TransportConfig::cc_yield
  Duration ack_delay_;       // TransportConfig::max_ack_delay (the peer's, assumed equal)
  Duration initial_rtt_;     // TransportConfig::initial_rtt, until the first sample
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
  Duration latest_rtt_;
  Duration srtt_;                          // the RTT estimator's smoothed RTT at the latest ACK
  ByteCount bw_valid_from_delivered_ = 0;  // samples of packets sent earlier are stale

  // Rounds: a round ends when a packet sent after the previous round's end is acked, so
  // a round acknowledges what the round before it sent.
  uint64_t round_count_ = 0;
  ByteCount next_round_delivered_ = 0;
  bool round_start_ = false;
  Time round_start_time_;
  ByteCount round_acked_ = 0;
  ByteCount round_lost_ = 0;
  uint64_t round_lost_packets_ = 0;
  bool round_had_timeout_ = false;  // a probe timeout fired: the round's signals are void
  bool round_app_limited_ = false;  // a delivery sample of the round was app-limited
  uint64_t round_ce_ = 0;
  uint64_t round_ect_ = 0;
  Duration round_min_rtt_ = Duration::Infinite();
  Duration round_max_rtt_;
  Duration last_round_max_rtt_ = Duration::Infinite();  // of the last complete round
  Bandwidth last_round_delivery_;  // acknowledged bytes / duration of the last round
  uint32_t empty_rounds_ = 0;      // consecutive rounds that saw the queue empty
  uint32_t loss_free_rounds_ = 0;  // consecutive rounds without loss
  double sent_gain_cur_ = 1.0;     // largest pacing gain while sending this round
  double sent_gain_prev_ = 1.0;    // ... the previous round (what this round acknowledges)
  double last_loss_rate_ = 0;
  double last_ce_fraction_ = 0;

  // Startup.
  bool full_bw_reached_ = false;
  Bandwidth full_bw_;
  uint32_t full_bw_count_ = 0;

  // PROBE_BW.
  Time phase_start_;
  uint64_t phase_start_round_ = 0;
  uint64_t next_probe_round_ = 0;
  double up_gain_ = 1.25;
  Bandwidth up_round_bw_;  // bandwidth when the current probe round started
  bool deep_drain_ = false;
  bool drain_after_probe_ = false;  // DOWN entered from UP (DrainsOwnProbeExcess)
  bool probe_from_empty_queue_ = false;                // the RTT showed no queue when UP began
  uint64_t last_standing_queue_round_ = ~uint64_t{0};  // the last standing-queue cut
  // Probe outcomes (probe_bw.found_share): the excess scale of the next probes, and the
  // state of the probe being judged.
  double probe_scale_ = 1.0;
  bool probe_judge_pending_ = false;
  uint64_t probe_judge_round_ = 0;
  Bandwidth probe_base_delivery_;  // the last round's delivery when the probe started
  Bandwidth model_before_cut_;     // the model before the last congestion cut
  bool queue_empty_since_cut_ = false;  // a round since that cut saw the queue empty
  double probe_ask_ = 0;           // its gain - 1
  Duration probe_length_;          // how long it lasted
  Duration probe_max_rtt_;         // the largest RTT acknowledged since it started
  Time probe_start_ = Time::Infinite();
  Time probe_down_end_ = Time::Infinite();  // end of the DOWN after it; infinite before
  uint64_t probe_backoffs_ = 0;

  // PROBE_RTT.
  Time probe_rtt_done_ = Time::Infinite();
  bool probe_rtt_round_done_ = false;
  ByteCount prior_cwnd_ = 0;

  // Congestion responses.
  uint64_t last_congestion_round_ = ~uint64_t{0};
  Time last_congestion_time_;
  uint64_t congestion_events_ = 0;
  uint64_t queue_drains_ = 0;
  // Path change: the round min RTT at the last standing-queue drain, the drains since
  // that did not lower it, and the model before the first of them.
  Duration last_standing_rtt_ = Duration::Infinite();
  uint32_t ineffective_drains_ = 0;
  Bandwidth bw_before_drains_;
  uint64_t path_rtt_changes_ = 0;
  Duration path_rtt_before_ = Duration::Infinite();  // min RTT before a path change
  // The path change came after drains that moved the queue (it grew, not a step): maybe a
  // competitor's flat queue. Until the old RTT is back or the new one held a window, the
  // queue counts as empty only at the old RTT (the responses toward competing go on).
  bool path_rtt_suspect_ = false;

  // ECN.
  double ecn_alpha_;
  uint64_t ecn_reductions_ = 0;

  // Competition with queue-building traffic.
  uint32_t queue_responses_ = 0;       // queue-based cuts since the queue was last seen empty
  uint64_t first_response_round_ = 0;  // the round of the first of them
  Bandwidth streak_first_bw_;          // the model before the first of them
  bool competing_ = false;
  uint64_t competing_entries_ = 0;
  // When a competitor was last seen: competing ended, or a path RTT taken from a flat
  // queue gave way to the old one.
  Time competitor_seen_ = Time::Infinite();
  // The competitor keeps its queue whatever the loss (TCP BBR): its flat queue gave way
  // (as in BBR's PROBE_RTT) and then an overflow episode went unanswered. Until
  // competing ends.
  bool flat_queue_gave_way_ = false;
  bool competitor_ignores_loss_ = false;
  // Until then the UP phase lasts a whole round, queue included (BbrParams::Compete::
  // catch_up).
  Time catch_up_until_;
  // While competing, after an overflow episode: the model's bound growing back as CUBIC's
  // window would, from the episode (zero: no bound).
  Time episode_time_;
  double episode_packets_ = 0;         // W_max: where the curve levels off, packets per RTT
  double episode_floor_packets_ = 0;   // the cut
  double episode_k_ = 0;               // seconds until the bound is back at W_max
  Bandwidth episode_bound_;            // at the latest ACK
  Bandwidth episode_bw_;               // the model before the cut, restored if not answered
  uint32_t episode_check_rounds_ = 0;  // rounds left to see the competitor answer it
};

}  // namespace longhaul
