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
//   PROBE_BW   a cycle DOWN (0.75) -> CRUISE (1.0, 2-4 rounds) -> UP (the fair probe
//              below, 1.05-1.75); UP goes on while the bandwidth keeps growing, faster
//              (1.5) on an empty queue, so a link whose rate went up is filled within a
//              few rounds
//   PROBE_RTT  after 10 s without an RTT sample within 1% of min RTT: cwnd 0.5 x BDP (not
//              BBRv1's 4 packets: a 725 MB pipe stays half full) for max(200 ms, a round)
//
// Congestion response, the long-haul part. Loss alone says nothing on a long lossy
// path, so random loss does not cut the rate. These are congestion, answered once per
// round by restarting the bandwidth model from the rate the path delivered lately
// (x 0.9) and draining (PROBE_BW DOWN; STARTUP ends):
//   - loss that comes with a queue: the RTT when the loss was found exceeds min RTT by
//     0.3 x min RTT (+ the ACK delay); BBR's own 1.25 probe queues at most 0.25 BDP;
//   - a round whose loss rate exceeds TransportConfig::cc_loss_threshold (counted from
//     8 lost packets), for buffers too shallow to show queueing delay;
//   - a standing queue: even the smallest RTT of a round sent without probing is 15%
//     above min RTT. The flows sharing the bottleneck pace above its rate in sum (each
//     max filter remembers a share it no longer has): they re-anchor on what they
//     delivered and drain at gain 0.5 until the queue is gone, so a flow that started
//     behind the queue also learns the path's RTT;
//   - ECN (DCTCP-like): per round alpha <- (1 - 1/16) alpha + F/16, F the CE-marked
//     share; a round with marks on packets sent without probing cuts the model by
//     alpha/2; marks caused by our own probe end the probe.
// A path whose RTT went up (a route change) looks like a standing queue that drains
// cannot empty. Unless competing or cc_yield, after two drains in a row that did not
// move the round's smallest RTT by 3 % and saw it flat within the round (a queue others
// keep grows or varies as they probe), that RTT is the path's: it becomes the min RTT and
// the cuts of those drains are undone (before: up to 10 s of drains, until the min-RTT
// window let go of the old path's RTT). A round that was app-limited does not drain (the
// flow sends what its application offers, below its model: cutting the model below the
// offered load only queues messages at the sender) but counts the same way.
// Sharing with traffic that keeps a queue (TCP CUBIC or BBR fill a buffer whatever
// longhaul does; TransportConfig::cc_compete, on by default): after more than two
// queue-based cuts (standing queue, loss with queue) spread over at least 40 rounds, with
// the queue never seen empty three rounds in a row, the flow competes. (Longhaul flows
// among themselves empty the queue within that: a newcomer's startup and drain keep it
// ~20 rounds.) Competing, queueing delay stops being a signal and the min RTT is not
// replaced by samples that show the competitor's queue; the probe is BBR's 1.25 on BBR's
// cycle (six rounds at gain 1 between probes, not 2-4: probing more often than a TCP BBR
// beside it took from that flow round after round); loss is
// congestion above 5 x cc_loss_threshold, or as an overflow episode (the first loss
// after 16 loss-free rounds): the model is halved and grows back no faster than CUBIC's
// window would (W(t) = 0.4 (t - K)^3 + W_max packets per RTT), as long as the queue
// empties within 4 rounds of the cut; where it does not, the competitor ignores loss
// (TCP BBR) and the cut is undone. Eight rounds with an empty queue end it; a competitor
// seen within the last 10 s is recognised after one response: one that made it compete,
// or a flat queue taken for the path's RTT that gave way to the old RTT (TCP BBR keeps
// its queue flat and empties it in its PROBE_RTT).
// cc_yield (or cc_compete off) never competes: longhaul yields (a scavenger).
// Fairness among longhaul flows: the UP probe asks for the same number of packets per
// round trip on top of every flow's bandwidth (1000: gain 1 + 1000 / bandwidth in packets
// per RTT, clamped to [1.05, 1.75]), an additive increase: after the multiplicative cuts
// above, what the link has spare goes to whichever flows probe first, and a probe that
// grew with the flow's size handed the large flows more of it. With equal increments the
// shares converge (AIMD); one flow alone at 10 Gbit/s x 58 ms probes by 1.12. A probe
// ends once it has queued 0.25 min RTT, as BBR's 1.25 would at most.
// A flow alone at its bottleneck gains nothing from that fairness and pays for it where
// 1000 packets are most of the BDP (1 Gbit/s x 58 ms: a 1.75 probe overflowed a one-BDP
// buffer, and random loss on its queue cut the model after every probe): a probe that
// found nothing while its own excess queued backs the next ones off towards BBR's 1.25;
// a probe that finds more restores the fair gain. Losses of packets sent during a probe
// or the drain after it end the probe, with no cut.
//
// docs/congestion-control.md has the reasons and the measurements.
// Thread-safety: none (owned by one Connection). Deterministic for a given seed.
#pragma once

#include <cstdint>

#include "transport/base/rng.h"
#include "transport/base/units.h"
#include "transport/core/cc/congestion_controller.h"
#include "transport/core/cc/windowed_filter.h"
#include "transport/core/config.h"

namespace longhaul {

// Constants of the algorithm. The defaults are the documented behaviour; tests change
// them to isolate one mechanism.
struct BbrParams {
  // Startup and drain.
  double startup_pacing_gain = 2.77;  // 4 ln 2 (BBRv3): the delivery rate doubles per round
  double startup_cwnd_gain = 2.0;
  double drain_pacing_gain = 1.0 / 2.77;
  double full_bw_growth = 1.25;  // startup ends after full_bw_rounds below this growth
  uint32_t full_bw_rounds = 3;
  double startup_ce_exit = 0.1;  // CE-marked share of a startup round that ends it
  // PROBE_BW.
  double cwnd_gain = 2.0;
  double probe_down_gain = 0.75;
  double probe_up_gain = 1.25;  // BBR's probe: without a model yet, and while competing
  // The fair probe: this many packets per round trip on top of the flow's bandwidth
  // (0: BBR's probe always), as a gain within [min_fair_probe_gain, max_probe_gain].
  double fair_probe_packets = 1000;
  double min_fair_probe_gain = 1.05;
  double max_probe_gain = 1.75;
  // The UP phase also ends, after at least a quarter of a min RTT, once the RTT is this
  // fraction of min RTT above it (+ ACK delay): the queue BBR's own 1.25 probe builds at
  // most. A larger gain finds room faster, it does not queue more (not while competing).
  double probe_queue_fraction = 0.25;
  // A probe that found nothing (the round that acknowledged it delivered less than
  // 1 + probe_found_share x (gain - 1) times what the round before it did) while the RTT
  // rose by at least probe_own_queue_share x (gain - 1) x its length (its excess queued:
  // the flow is alone at the bottleneck, or nearly) halves the next probes' excess over
  // 1, never below BBR's probe_up_gain; a probe that finds more restores the fair gain.
  // A flow alone on a 1 Gbit/s x 58 ms link probed by 1.75 and queued more than the
  // buffer (probe_found_share 0: off).
  double probe_found_share = 0.25;
  double probe_own_queue_share = 0.6;
  // Losses of packets sent from the start of a probe to the end of the DOWN phase after
  // it, found while the RTT shows a queue, are the probe's own overflow: the probe ends
  // (as for CE marks it caused), the model is not cut.
  bool probe_loss_ends_probe = true;
  // A probe round that grew the bandwidth by this much, or by 60 % of what the probe
  // asked for if that is less, on an empty queue raises the probe's gain to
  // probe_accel_gain (the link has room).
  double probe_accel_growth = 1.15;
  double probe_accel_gain = 1.5;
  uint32_t max_up_rounds = 30;       // bound on a probe that keeps finding room
  uint32_t cruise_rounds_min = 2;    // rounds at gain 1 between probes: uniform in
  uint32_t cruise_rounds_max = 4;    // [min, max]
  // Model.
  uint32_t bw_window_rounds = 10;
  Duration min_rtt_window = Duration::Seconds(10);
  double min_rtt_tolerance = 0.01;  // a sample this close to min RTT refreshes it
  Duration probe_rtt_duration = Duration::Milliseconds(200);
  double probe_rtt_cwnd_gain = 0.5;
  double pacing_margin = 0.01;  // pace this fraction below the estimate
  uint32_t initial_cwnd_packets = 10;
  uint32_t min_cwnd_packets = 4;
  // Congestion.
  double queue_delay_fraction = 0.3;      // of min RTT: a loss with more queueing is congestion
  uint32_t min_loss_packets = 8;          // a round's loss rate counts from this many losses
  double loss_beta = 0.9;                 // model after congestion, x the recent delivery rate
  double standing_queue_fraction = 0.15;  // of min RTT, through a whole round
  double standing_queue_beta = 0.9;
  double standing_queue_drain_gain = 0.5;
  double standing_queue_drain_rtts = 2;  // longest drain, in min RTTs
  // A path change: this many standing-queue drains in a row that did not lower the
  // round's smallest RTT by path_change_tolerance make that RTT the min RTT (0: never;
  // cc_compete on: never, it competes instead; cc_yield: never, it drains).
  uint32_t path_change_drains = 2;
  double path_change_tolerance = 0.03;
  // Competing with queue-building traffic: after more than this many responses to a
  // queue (standing-queue drains, cuts for loss with queueing delay) that never saw it
  // empty, the queue is not longhaul's to drain (TCP CUBIC or BBR fills it whatever
  // longhaul does); 0: never compete (yield to it).
  uint32_t compete_after_queue_responses = 2;
  // ... spread over at least this many rounds: a longhaul newcomer's startup and drain
  // keep a queue for ~20 rounds that the other flows' drains cannot empty; traffic that
  // keeps a queue whatever longhaul does keeps it longer.
  uint32_t compete_after_rounds = 40;
  // The count of responses starts again once this many rounds in a row saw the queue
  // empty (one is not enough: a drain empties it for a round even under a competitor
  // whose window is still growing, such as TCP CUBIC after its start).
  uint32_t queue_reset_empty_rounds = 3;
  // ... and it stops competing once this many rounds in a row saw the queue empty (not
  // one: a TCP BBR competitor empties it in its PROBE_RTT, 200 ms, every 10 s).
  uint32_t compete_exit_empty_rounds = 8;
  // While competing, rounds at gain 1 between probes: BBR's (its cycle has six).
  uint32_t compete_cruise_rounds = 6;
  // While competing, a round's loss rate is congestion above this multiple of
  // cc_loss_threshold (a queue-filling competitor keeps the buffer overflowing: it
  // answers loss late or not at all, and a flow that cuts at every overflow starves).
  double compete_loss_multiple = 5.0;
  // While competing, the first round with loss after this many loss-free rounds is a
  // loss-based competitor's overflow (CUBIC fills the buffer, loses, cuts, and grows
  // back for seconds): answered like that competitor answers it, x compete_episode_beta.
  // Loss in every round (TCP BBR keeps the buffer overflowing) is not an episode.
  uint32_t compete_episode_gap_rounds = 16;
  double compete_episode_beta = 0.5;
  // ... and the model grows back no faster than CUBIC's window would (W(t) = C (t - K)^3
  // + W_max in packets per min RTT, C in packets/s^3; 0: no bound): a model that probed
  // back within a few rounds took a little more from CUBIC at every episode.
  double compete_cubic_c = 0.4;
  // ... levelling off at (1 + beta) / 2 of the model before the episode (CUBIC's fast
  // convergence, applied at every episode) rather than at the model itself.
  bool compete_fast_convergence = true;
  // ... unless the competitor did not answer the loss: the queue was not seen empty in
  // this many rounds after the cut (TCP BBR keeps its rate through loss; cutting alone
  // hands it the link): the cut and the bound are undone.
  uint32_t compete_episode_check_rounds = 4;
  double ecn_gain = 1.0 / 16;            // DCTCP g
  double ecn_alpha_init = 0;             // DCTCP starts at 1; see bbr.cc
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
  // The model's bandwidth: the max filter, at least rate_min (zero before the first
  // sample without rate_min).
  // While competing after an overflow episode, no more than CUBIC's window would have
  // grown back to since.
  Bandwidth bandwidth() const {
    const Bandwidth bw = episode_bound_.IsZero() ? max_bw_.Get() : std::min(max_bw_.Get(), episode_bound_);
    return std::max(bw, rate_min_);
  }
  Duration min_rtt() const { return min_rtt_; }          // infinite before the first sample
  ByteCount Bdp(double gain = 1.0) const;
  double pacing_gain() const { return pacing_gain_; }
  bool full_bw_reached() const { return full_bw_reached_; }
  uint64_t congestion_events() const { return congestion_events_; }  // loss-driven
  uint64_t queue_drains() const { return queue_drains_; }            // standing queue
  uint64_t ecn_reductions() const { return ecn_reductions_; }
  uint64_t path_rtt_changes() const { return path_rtt_changes_; }  // min RTT re-anchored
  // Probes that found nothing and queued their own excess (probe_found_share), and the
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

 private:
  enum class Signal { kLossWithQueue, kLossRate, kStandingQueue, kEcn };

  void StartRound(const AckEvent& ack);
  void EndRound(Time now);
  void UpdateMinRtt(Time now, Duration rtt);
  void UpdateBandwidth(const AckEvent& ack, ByteCount prior_delivered);
  void CheckFullPipe();
  void UpdateMode(const AckEvent& ack);
  void EnterDrain(Time now);
  void EnterProbeBw(Time now, Phase phase);
  void EnterPhase(Time now, Phase phase);
  void ScheduleProbe();
  void EnterProbeRtt(Time now);
  void ExitProbeRtt(Time now);
  void Congestion(Time now, Signal signal, double factor);
  void NoteQueueResponse(Time now);
  // A standing queue at the end of a round: a drain, or the path's new RTT (see above).
  void StandingQueue(Time now, bool app_limited);
  Bandwidth RecentDeliveryRate(Time now) const;
  void UpdatePacingRate();
  void UpdateCwnd(ByteCount bytes_acked);
  ByteCount TargetCwnd(double gain) const { return Bdp(gain) + ack_allowance_; }
  ByteCount MinCwnd() const { return params_.min_cwnd_packets * max_datagram_; }
  // The queue is (nearly) empty: the latest RTT is within 5% of min RTT (+ ACK delay).
  bool QueueEmpty() const;
  double PacketsPerMinRtt(Bandwidth bw) const;  // 0 before an RTT sample

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
  Duration srtt_;  // the RTT estimator's smoothed RTT at the latest ACK
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
  // Competition with queue-building traffic.
  uint32_t queue_responses_ = 0;  // queue-based cuts since the queue was last seen empty
  uint64_t first_response_round_ = 0;  // the round of the first of them
  // Path change: the round min RTT at the last standing-queue drain, the drains since
  // that did not lower it, and the model before the first of them.
  Duration last_standing_rtt_ = Duration::Infinite();
  uint32_t ineffective_drains_ = 0;
  Bandwidth bw_before_drains_;
  uint64_t path_rtt_changes_ = 0;
  uint32_t empty_rounds_ = 0;   // consecutive rounds that saw the queue empty
  uint32_t loss_free_rounds_ = 0;  // consecutive rounds without loss
  bool competing_ = false;
  uint64_t competing_entries_ = 0;
  // When a competitor was last seen: competing ended, or a path RTT taken from a flat
  // queue gave way to the old one.
  Time competitor_seen_ = Time::Infinite();
  Duration path_rtt_before_ = Duration::Infinite();  // min RTT before a path change
  // While competing, after an overflow episode: the model's bound growing back as CUBIC's
  // window would, from the episode (zero: no bound).
  Time episode_time_;
  double episode_packets_ = 0;  // W_max: where the curve levels off, packets per RTT
  double episode_floor_packets_ = 0;  // the cut
  double episode_k_ = 0;        // seconds until the bound is back at W_max
  Bandwidth episode_bound_;     // at the latest ACK
  Bandwidth episode_bw_;        // the model before the cut, restored if not answered
  uint32_t episode_check_rounds_ = 0;  // rounds left to see the competitor answer it
  Bandwidth EpisodeBound(Time now) const;
  double sent_gain_cur_ = 1.0;     // largest pacing gain while sending this round
  double sent_gain_prev_ = 1.0;    // ... the previous round (what this round acknowledges)
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
  double up_gain_ = 1.25;
  Bandwidth up_round_bw_;  // bandwidth when the current probe round started
  bool deep_drain_ = false;
  // Probe outcomes (probe_found_share): the excess scale of the next probes, and the
  // state of the probe being judged.
  double probe_scale_ = 1.0;
  bool probe_judge_pending_ = false;
  uint64_t probe_judge_round_ = 0;
  Bandwidth probe_base_delivery_;  // the last round's delivery when the probe started
  double probe_ask_ = 0;           // its gain - 1
  Duration probe_length_;          // how long it lasted
  Duration probe_max_rtt_;         // the largest RTT acknowledged since it started
  Time probe_start_ = Time::Infinite();
  Time probe_down_end_ = Time::Infinite();  // end of the DOWN after it; infinite before
  uint64_t probe_backoffs_ = 0;
  void JudgeProbe(Time now);

  // PROBE_RTT.
  Time probe_rtt_done_ = Time::Infinite();
  bool probe_rtt_round_done_ = false;
  ByteCount prior_cwnd_ = 0;

  // Congestion responses.
  uint64_t last_congestion_round_ = ~uint64_t{0};
  Time last_congestion_time_;
  uint64_t congestion_events_ = 0;
  uint64_t queue_drains_ = 0;
  uint64_t ecn_reductions_ = 0;
};

}  // namespace longhaul
