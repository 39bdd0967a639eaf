// BbrController. bbr.h describes the model; docs/congestion-control.md the reasons and
// measurements. This file says why where it departs from BBRv1.

#include "transport/core/cc/bbr.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"
#include "transport/core/loss/rtt_estimator.h"

namespace longhaul {

BbrController::BbrController(const TransportConfig& config, uint64_t seed, BbrParams params)
    : params_(params),
      rng_(seed ^ 0xbb7c0de5eedULL),
      max_datagram_(config.MaxDatagramSize()),
      window_limit_(config.window),
      rate_cap_(config.rate),
      rate_min_(config.rate_min),
      loss_threshold_(config.cc_loss_threshold),
      compete_(config.cc_compete && !config.cc_yield),
      yield_(config.cc_yield),
      ack_delay_(config.max_ack_delay),
      initial_rtt_(config.initial_rtt),
      pacing_gain_(params.startup_pacing_gain),
      cwnd_gain_(params.startup_cwnd_gain),
      max_bw_(params.bw_window_rounds),
      ecn_alpha_(params.ecn_alpha_init) {
  // The peer acknowledges every ack_every packets (or after max_ack_delay), so delivery
  // arrives in steps; like BBR's send quanta, the window gets room for a few of them.
  ack_allowance_ = std::min<ByteCount>(2 * config.ack_every, 256) * max_datagram_;
  cwnd_ = std::min<ByteCount>(
      std::max<ByteCount>(params_.initial_cwnd_packets * max_datagram_,
                          rate_min_.IsZero() ? 0 : Bdp(params_.startup_cwnd_gain)),
      window_limit_);
  // ECN alpha starts at ecn_alpha_init = 0, not DCTCP's 1: startup's exit answers the
  // first marks (loss_beta), and a first cut of alpha/2 = 50% for a handful of marks would
  // halve a long fat pipe for many round trips.
  // Before any RTT sample: the initial window over the assumed RTT, at startup gain.
  // With rate_min, from that bandwidth (the window above is its BDP).
  pacing_rate_ = Bandwidth::FromBytesAndDuration(cwnd_, initial_rtt_).Scaled(pacing_gain_);
  if (!rate_min_.IsZero()) UpdatePacingRate();
}

const char* BbrController::ModeName() const {
  switch (mode_) {
    case Mode::kStartup:
      return "startup";
    case Mode::kDrain:
      return "drain";
    case Mode::kProbeRtt:
      return "probe_rtt";
    case Mode::kProbeBw:
      switch (phase_) {
        case Phase::kDown:
          return "probe_bw_down";
        case Phase::kCruise:
          return "probe_bw_cruise";
        case Phase::kUp:
          return "probe_bw_up";
      }
  }
  return "?";
}

ByteCount BbrController::Bdp(double gain) const {
  const Duration rtt = min_rtt_.IsInfinite() ? initial_rtt_ : min_rtt_;
  const Bandwidth bw = bandwidth();
  if (bw.IsZero()) {
    return static_cast<ByteCount>(gain * params_.initial_cwnd_packets * max_datagram_);
  }
  return static_cast<ByteCount>(gain * static_cast<double>(bw.BytesIn(rtt)));
}

Bandwidth BbrController::PacingRate() const {
  if (!rate_cap_.IsZero() && pacing_rate_ > rate_cap_) return rate_cap_;
  return pacing_rate_;
}

CcDebugState BbrController::DebugState() const {
  CcDebugState s;
  s.mode = ModeName();
  s.bandwidth_estimate = bandwidth();
  s.min_rtt = min_rtt_.IsInfinite() ? Duration::Zero() : min_rtt_;
  s.pacing_gain = pacing_gain_;
  s.cwnd_gain = cwnd_gain_;
  s.ce_fraction = last_ce_fraction_;
  s.loss_rate = last_loss_rate_;
  s.ecn_alpha = ecn_alpha_;
  s.pacing_rate = PacingRate();
  s.cwnd = cwnd_;
  s.rounds = round_count_;
  s.congestion_events = congestion_events_ + queue_drains_;
  s.ecn_reductions = ecn_reductions_;
  s.full_bw_reached = full_bw_reached_;
  return s;
}

double BbrController::ProbeGain() const {
  const Bandwidth bw = max_bw_.Get();
  // Competing with queue-building traffic: probe as BBR does (1.25); the fair probe is
  // for converging with flows that drain, and against a loss-based flow each probe's
  // overflow costs that flow a multiplicative cut.
  if (bw.IsZero() || min_rtt_.IsInfinite() || params_.fair_probe_packets <= 0 || competing_) {
    return params_.probe_up_gain;
  }
  // Packets per round trip at the current bandwidth: an absolute measure of the flow's
  // size that every flow on the link computes the same way. Every flow asks for the same
  // number of packets more (BBR's 1.25 asks a flow four times larger for four times
  // more, and the spare capacity after a cut goes to whichever probes first).
  const double packets = PacketsPerMinRtt(bw);
  const double gain = std::clamp(1 + params_.fair_probe_packets / std::max(packets, 1.0),
                                 params_.min_fair_probe_gain, params_.max_probe_gain);
  // After probes that found nothing and queued their own excess (JudgeProbe): less
  // excess, down to BBR's probe (or the fair gain where that is smaller).
  if (probe_scale_ >= 1) return gain;
  return std::max(std::min(gain, params_.probe_up_gain), 1 + (gain - 1) * probe_scale_);
}

double BbrController::PacketsPerMinRtt(Bandwidth bw) const {
  if (min_rtt_.IsInfinite()) return 0;
  return bw.bps() * min_rtt_.seconds() / (8.0 * static_cast<double>(max_datagram_));
}

Bandwidth BbrController::EpisodeBound(Time now) const {
  // CUBIC's window since the episode, W(t) = C (t - K)^3 + W_max, as a rate over the RTT;
  // never below the cut itself.
  const double t = (now - episode_time_).seconds() - episode_k_;
  const double packets =
      std::max(params_.compete_cubic_c * t * t * t + episode_packets_, episode_floor_packets_);
  return Bandwidth::BitsPerSecond(packets * 8.0 * static_cast<double>(max_datagram_) /
                                  srtt_.seconds());
}

bool BbrController::QueueEmpty() const {
  return !min_rtt_.IsInfinite() && latest_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_;
}

void BbrController::OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                                 bool is_app_limited) {
  bytes_in_flight_ = bytes_in_flight;
}

void BbrController::OnLoss(const LossEvent& loss, const RttEstimator& rtt) {
  // A probe timeout says that nothing was acknowledged for a long time, not how fast the
  // bottleneck is: the model stays (the connection sends its probes regardless), and the
  // round it falls in says nothing either (its RTTs and delivery span the silence).
  if (loss.persistent) {
    round_had_timeout_ = true;
    return;
  }
  bytes_in_flight_ = loss.bytes_in_flight;
  round_lost_ += loss.bytes_lost;
  round_lost_packets_ += loss.packets_lost;
  if (min_rtt_.IsInfinite() || !rtt.has_sample()) return;
  if (mode_ == Mode::kStartup || mode_ == Mode::kDrain) return;
  // Drop-tail loss happens at a full queue; the ACK that revealed the loss was for a
  // packet sent just after the lost one, so its RTT shows that queue. Random loss on an
  // empty queue comes without queueing delay. (Not in startup: a new flow on a busy link
  // sees the queue and the overflow losses of the others; it leaves startup on its own
  // loss rate or when its bandwidth stops growing, not at a fraction of its share. Not in
  // drain: the queue is startup's own and is going away.)
  const Duration queue_delay = rtt.latest() - min_rtt_;
  const Duration threshold = min_rtt_.Scaled(params_.queue_delay_fraction) + ack_delay_;
  if (!competing_ && queue_delay > threshold &&
      loss.largest_lost_sent_time > last_congestion_time_) {
    if (params_.probe_loss_ends_probe && !probe_start_.IsInfinite() &&
        loss.largest_lost_sent_time >= probe_start_ &&
        (probe_down_end_.IsInfinite() || loss.largest_lost_sent_time < probe_down_end_)) {
      // Sent during this flow's probe or the drain after it: the queue is (mostly) the
      // probe's own, and so is the overflow. The probe found the limit: it ends, and the
      // model, which did not include the probe, stays (random loss on that queue would
      // otherwise cut a flow alone on a lossy link after every probe).
      if (mode_ == Mode::kProbeBw && phase_ == Phase::kUp) {
        ScheduleProbe();
        EnterPhase(loss.now, Phase::kDown);
      }
      return;
    }
    Congestion(loss.now, Signal::kLossWithQueue, params_.loss_beta);
  }
}

void BbrController::OnAck(const AckEvent& ack, const RttEstimator& rtt) {
  bytes_in_flight_ = ack.bytes_in_flight;
  total_delivered_ = ack.total_delivered;
  const RateSample& rs = ack.sample;
  const bool has_sample = rs.rtt > Duration::Zero();
  // The newest acknowledged packet's delivered count when it was sent.
  const ByteCount prior_delivered =
      rs.delivered <= ack.total_delivered ? ack.total_delivered - rs.delivered : 0;

  round_start_ = false;
  if (has_sample && prior_delivered >= next_round_delivered_) StartRound(ack);
  round_acked_ += ack.bytes_acked;
  round_ce_ += ack.ce_delta;
  round_ect_ += ack.ect_delta;

  if (has_sample) {
    latest_rtt_ = rs.rtt;
    round_min_rtt_ = std::min(round_min_rtt_, rs.rtt);
    if (probe_judge_pending_) probe_max_rtt_ = std::max(probe_max_rtt_, rs.rtt);
    round_max_rtt_ = std::max(round_max_rtt_, rs.rtt);
    round_app_limited_ |= rs.is_app_limited;
    UpdateMinRtt(ack.now, rs.rtt);
    UpdateBandwidth(ack, prior_delivered);
  }
  if (rtt.has_sample()) srtt_ = rtt.srtt();
  if (!episode_bound_.IsZero()) episode_bound_ = EpisodeBound(ack.now);
  UpdateMode(ack);
  sent_gain_cur_ = std::max(sent_gain_cur_, pacing_gain_);
  UpdatePacingRate();
  UpdateCwnd(ack.bytes_acked);
}

void BbrController::StartRound(const AckEvent& ack) {
  if (round_count_ > 0) EndRound(ack.now);
  ++round_count_;
  round_start_time_ = ack.now;
  next_round_delivered_ = ack.total_delivered;
  sent_gain_prev_ = sent_gain_cur_;
  sent_gain_cur_ = pacing_gain_;
  round_start_ = true;
}

void BbrController::EndRound(Time now) {
  const Duration duration = now - round_start_time_;
  if (duration > Duration::Zero()) {
    last_round_delivery_ = Bandwidth::FromBytesAndDuration(round_acked_, duration);
  }
  const ByteCount total = round_acked_ + round_lost_;
  last_loss_rate_ = total > 0 ? static_cast<double>(round_lost_) / static_cast<double>(total) : 0;
  const uint64_t ecn_packets = round_ce_ + round_ect_;
  if (ecn_packets > 0) {
    last_ce_fraction_ = static_cast<double>(round_ce_) / static_cast<double>(ecn_packets);
    ecn_alpha_ = (1 - params_.ecn_gain) * ecn_alpha_ + params_.ecn_gain * last_ce_fraction_;
  }
  VLOG(2) << "bbr " << this << " t=" << now.seconds() << " round=" << round_count_ << " "
          << ModeName() << " gain=" << pacing_gain_ << " bw=" << max_bw_.Get().bps() / 1e9
          << " delivered=" << last_round_delivery_.bps() / 1e9
          << " min_rtt=" << min_rtt_.milliseconds()
          << " round_min_rtt=" << round_min_rtt_.milliseconds() << " lost=" << round_lost_packets_
          << " ce=" << round_ce_ << " inflight=" << bytes_in_flight_ << " bdp=" << Bdp();

  // This round acknowledged what the previous round sent; its signals were answered
  // already if that round started before the last response.
  const bool answered =
      (last_congestion_round_ != ~uint64_t{0} && round_count_ <= last_congestion_round_ + 1) ||
      round_had_timeout_;
  round_had_timeout_ = false;
  const bool sent_at_gain_1 = sent_gain_prev_ <= 1.0;
  // The queue was seen empty this round: whatever keeps it is gone (or was ours).
  if (!min_rtt_.IsInfinite() && !round_min_rtt_.IsInfinite() &&
      round_min_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_) {
    ineffective_drains_ = 0;
    last_standing_rtt_ = Duration::Infinite();
    ++empty_rounds_;
    if (empty_rounds_ >= params_.queue_reset_empty_rounds) queue_responses_ = 0;
    if (competing_ && empty_rounds_ >= params_.compete_exit_empty_rounds) {
      VLOG(1) << "bbr " << this << " t=" << now.seconds() << " competing ends";
      competing_ = false;
      competitor_seen_ = now;
    }
    episode_check_rounds_ = 0;  // the competitor answered the episode: the cut stands
  } else {
    empty_rounds_ = 0;
    if (episode_check_rounds_ > 0 && --episode_check_rounds_ == 0) {
      // The queue stayed through the rounds after an overflow episode: the competitor
      // did not answer the loss (TCP BBR), and the cut only handed it the link.
      VLOG(1) << "bbr " << this << " t=" << now.seconds() << " episode not answered: undone";
      episode_bound_ = Bandwidth();
      if (episode_bw_ > max_bw_.Get()) {
        max_bw_.Reset(episode_bw_, static_cast<int64_t>(round_count_));
      }
    }
  }
  // The bound stops mattering once it is well above the model.
  if (!episode_bound_.IsZero() && episode_bound_ > max_bw_.Get().Scaled(2)) {
    episode_bound_ = Bandwidth();
  }
  if (!answered) {
    const double loss_threshold =
        competing_ ? loss_threshold_ * params_.compete_loss_multiple : loss_threshold_;
    if (round_lost_packets_ >= params_.min_loss_packets && last_loss_rate_ > loss_threshold) {
      Congestion(now, Signal::kLossRate, params_.loss_beta);
    } else if (competing_ && round_lost_packets_ > 0 &&
               loss_free_rounds_ >= params_.compete_episode_gap_rounds) {
      // CUBIC's window at the loss: what was in flight at the model's rate over the
      // RTT with the queue, not the min RTT (its rate is W / RTT).
      const double packets_before =
          bandwidth().bps() * srtt_.seconds() / (8.0 * static_cast<double>(max_datagram_));
      episode_bw_ = max_bw_.Get();
      episode_check_rounds_ = params_.compete_episode_check_rounds;
      Congestion(now, Signal::kLossWithQueue, params_.compete_episode_beta);
      if (params_.compete_cubic_c > 0 && packets_before > 0) {
        // CUBIC's fast convergence, at every episode: the curve levels off below the
        // window before the loss, (1 + beta) / 2 of it, releasing bandwidth to a flow
        // that has less (CUBIC does so only when its window is below the last plateau).
        const double floor = params_.compete_episode_beta * packets_before;
        const double plateau = params_.compete_fast_convergence
                                   ? packets_before * (1 + params_.compete_episode_beta) / 2
                                   : packets_before;
        episode_time_ = now;
        episode_packets_ = plateau;
        episode_floor_packets_ = floor;
        episode_k_ = std::cbrt((plateau - floor) / params_.compete_cubic_c);
        episode_bound_ = EpisodeBound(now);
      }
    } else if (!competing_ && !min_rtt_.IsInfinite() && !round_min_rtt_.IsInfinite() &&
               round_min_rtt_ >
                   min_rtt_ + min_rtt_.Scaled(params_.standing_queue_fraction) + ack_delay_ &&
               ((mode_ == Mode::kProbeBw && phase_ != Phase::kUp && sent_at_gain_1) ||
                (round_app_limited_ && mode_ != Mode::kProbeRtt))) {
      // Even the smallest RTT of a round sent without probing (or sending less than the
      // model, app-limited, in any mode: a flow of messages may never leave startup)
      // shows a queue: it stands.
      StandingQueue(now, round_app_limited_);
    } else if (round_ce_ > 0) {
      if (mode_ == Mode::kStartup) {
        // A few marks as the queue passes the threshold are expected; a share this large
        // means startup has filled the pipe.
        if (last_ce_fraction_ >= params_.startup_ce_exit) {
          Congestion(now, Signal::kEcn, params_.loss_beta);
        }
      } else if (sent_at_gain_1) {
        Congestion(now, Signal::kEcn, 1 - ecn_alpha_ / 2);
      } else if (mode_ == Mode::kProbeBw && phase_ == Phase::kUp) {
        // Marks caused by our own probe: the probe found the limit. End it, no cut.
        ScheduleProbe();
        EnterPhase(now, Phase::kDown);
      }
    }
  }
  loss_free_rounds_ = round_lost_packets_ > 0 ? 0 : loss_free_rounds_ + 1;
  round_acked_ = 0;
  round_lost_ = 0;
  round_lost_packets_ = 0;
  round_ce_ = 0;
  round_ect_ = 0;
  round_min_rtt_ = Duration::Infinite();
  round_app_limited_ = false;
  last_round_max_rtt_ = round_max_rtt_;
  round_max_rtt_ = Duration::Zero();
}

void BbrController::UpdateMinRtt(Time now, Duration rtt) {
  const bool expired = !min_rtt_.IsInfinite() && now > min_rtt_stamp_ + params_.min_rtt_window;
  // While competing the queue is someone else's and never empties: a sample taken then
  // shows that queue, not the path. Keeping the old minimum keeps the window at two of
  // this flow's BDPs instead of growing with the competitor's queue (and crowding it out).
  if (rtt <= min_rtt_ || (expired && !competing_)) {
    if (!path_rtt_before_.IsInfinite() && rtt <= path_rtt_before_.Scaled(1.05) + ack_delay_) {
      // The path's RTT taken after drains that did not move a flat queue was not the
      // path's: the old one is back, so the queue was traffic that keeps it flat (TCP
      // BBR) and empties it now and then (its PROBE_RTT). A competitor, seen now.
      VLOG(1) << "bbr " << this << " t=" << now.seconds() << " path RTT back to "
              << rtt.milliseconds() << " ms: the flat queue was a competitor's";
      competitor_seen_ = now;
      path_rtt_before_ = Duration::Infinite();
    } else if (expired) {
      path_rtt_before_ = Duration::Infinite();  // the new RTT held a whole window
    }
    min_rtt_ = rtt;
    min_rtt_stamp_ = now;
  } else if (rtt <= min_rtt_.Scaled(1 + params_.min_rtt_tolerance) + ack_delay_) {
    // The queue was empty again (within a hair of the minimum and the peer's ACK delay):
    // the minimum is still the path's, no need to drain a long fat pipe to learn it.
    min_rtt_stamp_ = now;
  }
  if (expired && mode_ != Mode::kProbeRtt) EnterProbeRtt(now);
}

void BbrController::UpdateBandwidth(const AckEvent& ack, ByteCount prior_delivered) {
  const RateSample& rs = ack.sample;
  if (rs.delivery_rate.IsZero()) return;
  // Packets sent before the last reduction measured the old sending rate.
  if (prior_delivered < bw_valid_from_delivered_) return;
  // An interval shorter than the path's round trip means ACK compression; the rate it
  // shows is not the bottleneck's (tcp_rate.c discards these too).
  if (!min_rtt_.IsInfinite() && rs.interval < min_rtt_) return;
  // App-limited samples only count when they show more than the model: the sender did
  // not try to fill the pipe, so a low rate says nothing about the bottleneck.
  if (!rs.is_app_limited || max_bw_.empty() || rs.delivery_rate >= max_bw_.Get()) {
    max_bw_.Update(rs.delivery_rate, static_cast<int64_t>(round_count_));
  }
}

void BbrController::CheckFullPipe() {
  if (full_bw_reached_ || max_bw_.empty()) return;
  const Bandwidth bw = max_bw_.Get();
  if (bw >= full_bw_.Scaled(params_.full_bw_growth)) {
    full_bw_ = bw;
    full_bw_count_ = 0;
    return;
  }
  if (++full_bw_count_ >= params_.full_bw_rounds) full_bw_reached_ = true;
}

void BbrController::UpdateMode(const AckEvent& ack) {
  const Time now = ack.now;
  switch (mode_) {
    case Mode::kStartup:
      if (round_start_ && !ack.sample.is_app_limited) CheckFullPipe();
      if (full_bw_reached_) EnterDrain(now);
      break;
    case Mode::kDrain:
      break;
    case Mode::kProbeBw: {
      if (probe_judge_pending_ && round_start_ && phase_ != Phase::kUp &&
          round_count_ >= probe_judge_round_) {
        JudgeProbe(now);
      }
      const bool full_length = now - phase_start_ > min_rtt_;
      switch (phase_) {
        case Phase::kDown: {
          // Drain this flow's part of the queue: in flight down to the BDP and the RTT
          // back near min RTT, or give up after the longest drain.
          const Duration longest =
              min_rtt_.Scaled(deep_drain_ ? params_.standing_queue_drain_rtts : 1.0);
          if (now - phase_start_ > longest || (bytes_in_flight_ <= Bdp() && QueueEmpty())) {
            EnterPhase(now, Phase::kCruise);
          }
          break;
        }
        case Phase::kCruise:
          if (round_start_ && round_count_ >= next_probe_round_) EnterPhase(now, Phase::kUp);
          break;
        case Phase::kUp:
          // The pipe plus up_gain - 1 BDP of queue is in flight: the bottleneck is full.
          // While the link has room the bandwidth estimate (and so the BDP) grows with
          // the probe and this does not happen: the probe goes on.
          // Or the probe has queued what BBR's 1.25 probe would at most (a larger gain
          // finds room faster; it does not queue more, which would overflow the buffer
          // for loss-based neighbours such as TCP CUBIC).
          const bool probe_queued =
              !competing_ && now - phase_start_ > min_rtt_ / 4 &&
              latest_rtt_ > min_rtt_.Scaled(1 + params_.probe_queue_fraction) + ack_delay_;
          if ((full_length && bytes_in_flight_ >= Bdp(up_gain_)) || probe_queued ||
              round_count_ - phase_start_round_ > params_.max_up_rounds) {
            ScheduleProbe();
            EnterPhase(now, Phase::kDown);
          } else if (round_start_) {
            // A round of the probe found more bandwidth and no queue: the link's rate went
            // up (or a competitor left). Probe faster to get there within a few rounds.
            const Bandwidth bw = max_bw_.Get();
            const double growth =
                std::min(params_.probe_accel_growth, 1 + 0.6 * (up_gain_ - 1));
            if (bw >= up_round_bw_.Scaled(growth) &&
                last_round_max_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_) {
              up_gain_ = std::max(up_gain_, params_.probe_accel_gain);
              pacing_gain_ = up_gain_;
            }
            up_round_bw_ = bw;
          }
          break;
      }
      break;
    }
    case Mode::kProbeRtt: {
      const ByteCount target = std::max(MinCwnd(), Bdp(params_.probe_rtt_cwnd_gain));
      if (probe_rtt_done_.IsInfinite()) {
        if (bytes_in_flight_ <= target + max_datagram_) {
          // In flight is down to the probe window: hold it for max(duration, a round).
          probe_rtt_done_ = now + params_.probe_rtt_duration;
          probe_rtt_round_done_ = false;
          next_round_delivered_ = total_delivered_;
        }
      } else {
        if (round_start_) probe_rtt_round_done_ = true;
        if (probe_rtt_round_done_ && now >= probe_rtt_done_) ExitProbeRtt(now);
      }
      break;
    }
  }
  // Drain ends once the queue startup built is gone (checked after the switch so that a
  // startup that ends on this ACK can end its drain at once).
  if (mode_ == Mode::kDrain && bytes_in_flight_ <= Bdp()) {
    // Packets sent until now may still meet the rest of startup's queue: their losses are
    // not a new congestion.
    last_congestion_time_ = now;
    EnterProbeBw(now, Phase::kCruise);
  }
}

void BbrController::EnterDrain(Time now) {
  // Draining is the answer to startup's overshoot: losses and marks of packets sent until
  // now are not congestion to answer again.
  last_congestion_round_ = round_count_;
  last_congestion_time_ = now;
  full_bw_reached_ = true;
  mode_ = Mode::kDrain;
  pacing_gain_ = params_.drain_pacing_gain;
  cwnd_gain_ = params_.startup_cwnd_gain;
}

void BbrController::EnterProbeBw(Time now, Phase phase) {
  mode_ = Mode::kProbeBw;
  ScheduleProbe();
  EnterPhase(now, phase);
}

void BbrController::ScheduleProbe() {
  // The next probe comes a random number of rounds from now, so flows sharing a link
  // probe at different times. A standing-queue drain does not move it: the probes are
  // what lets the flows' shares converge.
  // Competing, as often as BBR probes (a cycle of eight phases: six rounds at gain 1
  // between probes); a flow that probed more often than the TCP BBR beside it took from it
  // round after round.
  const uint32_t cruise = competing_ ? params_.compete_cruise_rounds
                                     : params_.cruise_rounds_min +
                                           static_cast<uint32_t>(rng_.UniformInt(
                                               params_.cruise_rounds_max - params_.cruise_rounds_min + 1));
  next_probe_round_ = round_count_ + 1 + cruise;
}

void BbrController::EnterPhase(Time now, Phase phase) {
  if (phase_ == Phase::kUp && phase != Phase::kUp) probe_length_ = now - phase_start_;
  // The drain after a probe is over (however it ended): later losses are not the probe's.
  if (phase == Phase::kCruise && probe_down_end_.IsInfinite()) probe_down_end_ = now;
  phase_ = phase;
  phase_start_ = now;
  phase_start_round_ = round_count_;
  cwnd_gain_ = params_.cwnd_gain;
  deep_drain_ = false;
  switch (phase) {
    case Phase::kDown:
      pacing_gain_ = params_.probe_down_gain;
      break;
    case Phase::kCruise:
      pacing_gain_ = 1.0;
      break;
    case Phase::kUp:
      up_gain_ = ProbeGain();
      pacing_gain_ = up_gain_;
      up_round_bw_ = max_bw_.Get();
      probe_start_ = now;
      probe_down_end_ = Time::Infinite();
      if (params_.probe_found_share > 0) {
        // Judged at the first round start after it, at least two rounds on: by then the
        // packets it sent have been acknowledged.
        probe_judge_pending_ = true;
        probe_judge_round_ = round_count_ + 2;
        probe_base_delivery_ = last_round_delivery_;
        probe_ask_ = up_gain_ - 1;
        probe_max_rtt_ = Duration::Zero();
      }
      break;
  }
}

void BbrController::JudgeProbe(Time now) {
  probe_judge_pending_ = false;
  // Found more: the round that acknowledged the probe delivered more than the round
  // before it, by a share of what the probe asked for. (A newcomer's probe takes share
  // from the others in the FIFO, so its delivery grows; a flow alone at the bottleneck
  // gets nothing more.)
  const bool found = last_round_delivery_ >=
                     probe_base_delivery_.Scaled(1 + params_.probe_found_share * probe_ask_);
  // Its own queue: the RTT rose by a good part of the probe's excess over its length, as
  // when all of it queued at a bottleneck this flow fills alone.
  const Duration rise = probe_max_rtt_ - min_rtt_ - ack_delay_;
  const bool own_queue =
      probe_ask_ > 0 && rise >= probe_length_.Scaled(params_.probe_own_queue_share * probe_ask_);
  if (found) {
    probe_scale_ = 1.0;
  } else if (own_queue) {
    probe_scale_ = std::max(probe_scale_ * 0.5, 1.0 / 64);
    ++probe_backoffs_;
  }
  VLOG(2) << "bbr " << this << " t=" << now.seconds() << " probe x" << 1 + probe_ask_
          << " found=" << found << " own_queue=" << own_queue << " rise_ms=" << rise.milliseconds()
          << " length_ms=" << probe_length_.milliseconds() << " next scale " << probe_scale_;
}

void BbrController::EnterProbeRtt(Time now) {
  if (probe_down_end_.IsInfinite()) probe_down_end_ = now;
  prior_cwnd_ = cwnd_;
  mode_ = Mode::kProbeRtt;
  pacing_gain_ = 1.0;
  cwnd_gain_ = params_.probe_rtt_cwnd_gain;
  probe_rtt_done_ = Time::Infinite();
  probe_rtt_round_done_ = false;
}

void BbrController::ExitProbeRtt(Time now) {
  min_rtt_stamp_ = now;
  probe_rtt_done_ = Time::Infinite();
  cwnd_ = std::max(cwnd_, prior_cwnd_);
  if (full_bw_reached_) {
    // Half the pipe is empty: refill it at gain 1 rather than probing on top of it.
    EnterProbeBw(now, Phase::kCruise);
  } else {
    mode_ = Mode::kStartup;
    pacing_gain_ = params_.startup_pacing_gain;
    cwnd_gain_ = params_.startup_cwnd_gain;
  }
}

Bandwidth BbrController::RecentDeliveryRate(Time now) const {
  // What the path delivered lately, as an average (a max of per-ACK samples overshoots,
  // and the samples right after a rate drop still span the old rate): this round so far
  // when it is long enough to mean something, else the last complete round.
  const Duration d = now - round_start_time_;
  if (!min_rtt_.IsInfinite() && d >= min_rtt_ / 4 && round_acked_ > 0) {
    return Bandwidth::FromBytesAndDuration(round_acked_, d);
  }
  return last_round_delivery_;
}

void BbrController::NoteQueueResponse(Time now) {
  // Cuts for a queue that never empties: traffic that does not yield to delay keeps it
  // (TCP fills a buffer whatever we do), and cutting again would hand it the link.
  // Compete, with loss as an overflow episode or above a higher rate as the congestion
  // signals, until the queue is seen empty. A competitor seen within the last min-RTT
  // window (its queue emptied for a moment, as CUBIC's does after a cut) is likely back:
  // one such response says so.
  const bool recent =
      !competitor_seen_.IsInfinite() && now - competitor_seen_ < params_.min_rtt_window;
  if (queue_responses_++ == 0) first_response_round_ = round_count_;
  const bool persistent = queue_responses_ > params_.compete_after_queue_responses &&
                          round_count_ - first_response_round_ >= params_.compete_after_rounds;
  if (compete_ && params_.compete_after_queue_responses > 0 && (persistent || recent)) {
    VLOG(1) << "bbr " << this << " t=" << now.seconds() << " competing starts";
    competing_ = true;
    ++competing_entries_;
    queue_responses_ = 0;
  }
}

void BbrController::StandingQueue(Time now, bool app_limited) {
  // Did the last drain lower the queue? A queue this flow (or longhaul flows draining
  // together) built goes down within the drain's two round trips. A new path RTT stays
  // where it is and is flat within the round (no queue moves it); a queue other traffic
  // keeps moves (it grows, or varies within the round as they probe).
  const Duration tolerance = round_min_rtt_.Scaled(params_.path_change_tolerance);
  const bool unmoved = !last_standing_rtt_.IsInfinite() &&
                       round_min_rtt_ + tolerance >= last_standing_rtt_ &&
                       round_min_rtt_ <= last_standing_rtt_ + tolerance &&
                       round_max_rtt_ <= round_min_rtt_ + tolerance + ack_delay_;
  if (unmoved) {
    ++ineffective_drains_;
  } else {
    ineffective_drains_ = 0;
    bw_before_drains_ = max_bw_.Get();
  }
  last_standing_rtt_ = round_min_rtt_;
  if (!competing_ && !yield_ && params_.path_change_drains > 0 &&
      ineffective_drains_ >= params_.path_change_drains) {
    // Drains at half the rate did not move it: not a queue this flow can drain but the
    // path's RTT (a route change; or traffic that keeps a queue whatever longhaul does,
    // which the min-RTT window would take for the path's RTT after 10 s anyway). Take it
    // as the min RTT and undo the cuts of those drains.
    VLOG(1) << "bbr " << this << " t=" << now.seconds() << " path RTT " << min_rtt_.milliseconds()
            << " -> " << round_min_rtt_.milliseconds() << " ms";
    path_rtt_before_ = std::min(path_rtt_before_, min_rtt_);
    min_rtt_ = round_min_rtt_;
    min_rtt_stamp_ = now;
    ++path_rtt_changes_;
    ineffective_drains_ = 0;
    last_standing_rtt_ = Duration::Infinite();
    if (bw_before_drains_ > max_bw_.Get()) {
      max_bw_.Reset(bw_before_drains_, static_cast<int64_t>(round_count_));
    }
    if (mode_ == Mode::kProbeBw && phase_ == Phase::kDown) EnterPhase(now, Phase::kCruise);
    UpdatePacingRate();
    return;
  }
  if (app_limited) return;
  Congestion(now, Signal::kStandingQueue, params_.standing_queue_beta);
}

void BbrController::Congestion(Time now, Signal signal, double factor) {
  if (round_count_ == last_congestion_round_) return;  // once per round
  last_congestion_round_ = round_count_;
  last_congestion_time_ = now;
  switch (signal) {
    case Signal::kEcn:
      ++ecn_reductions_;
      break;
    case Signal::kStandingQueue:
      ++queue_drains_;
      NoteQueueResponse(now);
      break;
    case Signal::kLossWithQueue:
      ++congestion_events_;
      if (!competing_) NoteQueueResponse(now);  // (while competing: an overflow episode)
      break;
    case Signal::kLossRate:
      ++congestion_events_;
      break;
  }
  // Restart the model from what the path delivered lately, times the reduction: the max
  // filter would otherwise hold a rate the path no longer has (a rate step down, a new
  // competitor) for bw_window_rounds and keep the queue full all that time.
  static constexpr const char* kSignalNames[] = {"loss_with_queue", "loss_rate", "standing_queue",
                                                 "ecn"};
  VLOG(1) << "bbr " << this << " t=" << now.seconds() << " " << ModeName()
          << " congestion: " << kSignalNames[static_cast<int>(signal)] << " x" << factor;
  const Bandwidth bw = max_bw_.Get();
  Bandwidth latest = RecentDeliveryRate(now);
  if (latest.IsZero() || latest > bw) latest = bw;
  if (!latest.IsZero()) max_bw_.Reset(latest.Scaled(factor), static_cast<int64_t>(round_count_));
  // Samples of packets sent before now measured the old sending rate; after a standing
  // queue, what each flow got while the queue built, which favours the largest. The cut
  // holds until the probes refill the link (equal probes: the shares converge). Not where
  // the flow delivered less than half its model (held back by its peer's credit, or
  // jitter on a short path read as a queue): held there, the model falls to what a flow
  // that hardly sent delivered, and never climbs back.
  if (signal != Signal::kStandingQueue || latest >= bw.Scaled(0.5)) {
    bw_valid_from_delivered_ = total_delivered_ + 1;
  }
  switch (mode_) {
    case Mode::kStartup:
      EnterDrain(now);
      break;
    case Mode::kProbeBw:
      if (signal == Signal::kStandingQueue) {
        // Drain the queue the flows built together, deep enough that it empties and every
        // flow (also one that started behind the queue) sees the path's RTT.
        EnterPhase(now, Phase::kDown);
        pacing_gain_ = params_.standing_queue_drain_gain;
        deep_drain_ = true;
      } else if (signal == Signal::kEcn) {
        // The cut itself lowers the queue (DCTCP); only a probe in progress ends.
        if (phase_ == Phase::kUp) {
          ScheduleProbe();
          EnterPhase(now, Phase::kDown);
        }
      } else {
        ScheduleProbe();
        EnterPhase(now, Phase::kDown);
      }
      break;
    case Mode::kDrain:
    case Mode::kProbeRtt:
      break;
  }
  UpdatePacingRate();
  cwnd_ = std::max(MinCwnd(), std::min(cwnd_, TargetCwnd(cwnd_gain_)));
}

void BbrController::UpdatePacingRate() {
  const Bandwidth bw = bandwidth();
  if (bw.IsZero()) return;
  const Bandwidth rate = bw.Scaled(pacing_gain_ * (1 - params_.pacing_margin));
  // Startup never slows down (a low early sample must not stall the ramp).
  if (full_bw_reached_ || rate > pacing_rate_) pacing_rate_ = rate;
}

void BbrController::UpdateCwnd(ByteCount bytes_acked) {
  const ByteCount target = TargetCwnd(cwnd_gain_);
  if (full_bw_reached_) {
    cwnd_ = std::min(cwnd_ + bytes_acked, target);
  } else if (cwnd_ < target || total_delivered_ < params_.initial_cwnd_packets * max_datagram_) {
    cwnd_ += bytes_acked;
  }
  cwnd_ = std::max(cwnd_, MinCwnd());
  if (mode_ == Mode::kProbeRtt) {
    cwnd_ = std::min(cwnd_, std::max(MinCwnd(), Bdp(params_.probe_rtt_cwnd_gain)));
  }
  cwnd_ = std::min(cwnd_, window_limit_);
}

}  // namespace longhaul
