// BbrController. See bbr.h for the model and docs/congestion-control.md for the reasons
// behind the long-haul choices; this file says why at the places where it departs from
// BBRv1.

#include "transport/core/cc/bbr.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "glog/logging.h"
#include "transport/core/loss/rtt_estimator.h"

namespace longhaul {

// TEMP experiment hook (removed before commit).
static BbrParams FromEnv(BbrParams p) {
  const char* e = getenv("LH_BBR");
  if (!e) return p;
  std::string s(e);
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string kv = s.substr(i, j - i);
    size_t eq = kv.find('=');
    std::string k = kv.substr(0, eq);
    double v = atof(kv.substr(eq + 1).c_str());
#define P(name) if (k == #name) p.name = v;
    P(startup_pacing_gain) P(probe_up_gain) P(probe_down_gain) P(cruise_rounds_min)
    P(cruise_rounds_max) P(probe_up_growth) P(standing_queue_fraction) P(standing_queue_beta)
    P(loss_beta) P(queue_delay_fraction) P(probe_capacity_share) P(max_probe_gain)
    P(bw_window_rounds) P(startup_cwnd_gain) P(cwnd_gain) P(standing_queue_rounds)
    P(gradient_deadband) P(standing_queue_down) P(up_assess) P(down_until_empty) P(down_max_rtts)
    P(probe_success_gain) P(probe_success_fraction) P(binomial_c)
    P(standing_queue_drain_gain) P(deep_drain_max_rtts) P(reset_from_since_congestion) P(reset_from_avg)
#undef P
    i = j + 1;
  }
  return p;
}

BbrController::BbrController(const TransportConfig& config, uint64_t seed, BbrParams params)
    : params_(FromEnv(params)),
      rng_(seed ^ 0xbb7c0de5eedULL),
      max_datagram_(config.MaxDatagramSize()),
      window_limit_(config.window),
      rate_cap_(config.rate),
      loss_threshold_(config.cc_loss_threshold),
      ack_delay_(config.max_ack_delay),
      pacing_gain_(params_.startup_pacing_gain),
      cwnd_gain_(params_.startup_cwnd_gain),
      max_bw_(params_.bw_window_rounds),
      initial_rtt_(config.initial_rtt),
      ecn_alpha_(params_.ecn_alpha_init) {
  // ACK aggregation: the peer acknowledges every ack_every packets (or after
  // max_ack_delay), so delivery comes in steps; BBR adds a few send quanta for this.
  ack_allowance_ = std::min<ByteCount>(2 * config.ack_every, 256) * max_datagram_;
  cwnd_ = std::min<ByteCount>(params_.initial_cwnd_packets * max_datagram_, window_limit_);
  // Before any RTT sample: the initial window over the assumed RTT, at startup gain.
  pacing_rate_ = Bandwidth::FromBytesAndDuration(cwnd_, initial_rtt_).Scaled(pacing_gain_);
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
  const Bandwidth bw = max_bw_.Get();
  if (bw.IsZero()) {
    return static_cast<ByteCount>(gain * params_.initial_cwnd_packets * max_datagram_);
  }
  return static_cast<ByteCount>(gain * static_cast<double>(bw.BytesIn(rtt)));
}

ByteCount BbrController::TargetCwnd(double gain) const { return Bdp(gain) + ack_allowance_; }

Bandwidth BbrController::PacingRate() const {
  if (!rate_cap_.IsZero() && pacing_rate_ > rate_cap_) return rate_cap_;
  return pacing_rate_;
}

CcDebugState BbrController::DebugState() const {
  CcDebugState s;
  s.mode = ModeName();
  s.bandwidth_estimate = max_bw_.Get();
  s.min_rtt = min_rtt_.IsInfinite() ? Duration::Zero() : min_rtt_;
  s.pacing_gain = pacing_gain_;
  s.cwnd_gain = cwnd_gain_;
  s.ce_fraction = last_ce_fraction_;
  s.loss_rate = last_loss_rate_;
  s.ecn_alpha = ecn_alpha_;
  s.pacing_rate = PacingRate();
  s.cwnd = cwnd_;
  s.rounds = round_count_;
  s.congestion_events = congestion_events_;
  s.ecn_reductions = ecn_reductions_;
  s.full_bw_reached = full_bw_reached_;
  return s;
}

void BbrController::OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                                 bool is_app_limited) {
  bytes_in_flight_ = bytes_in_flight;
  round_sent_ += bytes;
}

void BbrController::OnLoss(const LossEvent& loss, const RttEstimator& rtt) {
  // A probe timeout says that nothing was acknowledged for a long time, not how fast
  // the bottleneck is: the model stays (the connection sends its probes regardless).
  if (loss.persistent) return;
  bytes_in_flight_ = loss.bytes_in_flight;
  round_lost_ += loss.bytes_lost;
  round_lost_packets_ += loss.packets_lost;
  if (min_rtt_.IsInfinite() || !rtt.has_sample()) return;
  // Drop-tail loss happens when the queue is full; the ACK that revealed the loss was
  // for a packet sent right after the lost one, so its RTT shows that queue. Random loss
  // on an empty queue does not come with queueing delay, and the 1.25 probe queues at
  // most 0.25 x BDP, below the threshold.
  const Duration queue_delay = rtt.latest() - min_rtt_;
  const Duration threshold = min_rtt_.Scaled(params_.queue_delay_fraction) + ack_delay_;
  // Not in startup: a new flow on a busy link sees the queue the others keep, and their
  // overflow losses; it leaves startup on its own loss rate or when its bandwidth stops
  // growing, otherwise it would stop at a fraction of its share.
  if (mode_ != Mode::kStartup && queue_delay > threshold &&
      loss.largest_lost_sent_time > last_congestion_time_) {
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
    round_min_rtt_ = std::min(round_min_rtt_, rs.rtt);
    round_rtt_sum_ns_ += static_cast<double>(rs.rtt.ns());
    ++round_rtt_count_;
    latest_rtt_ = rs.rtt;
    UpdateMinRtt(ack.now, rs.rtt);
    UpdateBandwidth(ack, prior_delivered);
  }
  UpdateMode(ack);
  sent_gain_cur_ = std::max(sent_gain_cur_, pacing_gain_);
  UpdatePacingRate();
  UpdateCwnd(ack.bytes_acked);
}

void BbrController::StartRound(const AckEvent& ack) {
  if (round_count_ > 0) {
    MeasureRound(ack.now);
    EndRound(ack.now);
  }
  round_start_time_ = ack.now;
  round_sent_ = 0;
  ++round_count_;
  // The round that just ended acknowledged the packets sent during the round before it.
  assessed_gain_before_ = assessed_gain_;
  assessed_gain_ = sent_gain_prev_;
  sent_gain_prev_ = sent_gain_cur_;
  sent_gain_cur_ = pacing_gain_;
  next_round_delivered_ = ack.total_delivered;
  round_start_ = true;
}

void BbrController::MeasureRound(Time now) {
  const Duration d = now - round_start_time_;
  if (d <= Duration::Zero()) return;
  // This round acknowledged what the previous round sent: a matched (sent, delivered)
  // pair of rates for the previous round's sending.
  const Bandwidth sent = Bandwidth::FromBytesAndDuration(round_sent_, d);
  const Bandwidth delivered = Bandwidth::FromBytesAndDuration(round_acked_, d);
  const Bandwidth probe_sent = pair_sent_next_;
  const Bandwidth base_sent = pair_sent_;
  const Bandwidth base_delivered = pair_delivered_;
  pair_sent_ = pair_sent_next_;
  pair_delivered_ = delivered;
  pair_sent_next_ = sent;
  // Capacity from a probe: with the link full, raising this flow's sending by gamma
  // raises its delivery by g = gamma / (gamma s + 1 - s), s = its share of the link.
  if (mode_ != Mode::kProbeBw || base_sent.IsZero() || base_delivered.IsZero()) return;
  if (assessed_gain_ != 1.0 || sent_gain_prev_ <= 1.0) return;
  const double gamma = probe_sent.bps() / base_sent.bps();
  const double g = delivered.bps() / base_delivered.bps();
  if (gamma < 1.1) return;
  // A probe that raised this flow's delivery by a good part of its sending increase
  // took the bandwidth from other flows (or found room): this flow has a small share,
  // and the next probe is larger. One that did not (a flow alone on a full link, or a
  // large share) probes gently.
  probe_succeeded_ = g >= 1 + (gamma - 1) * params_.probe_success_fraction;
  VLOG(2) << "bbr " << this << " probe gamma=" << gamma << " g=" << g << " ok=" << probe_succeeded_;
  if (g >= gamma * 0.97) return;  // the link had room
  const double share = std::clamp((gamma / g - 1) / (gamma - 1), 0.02, 1.0);
  const Bandwidth c = base_delivered.Scaled(1 / share);
  capacity_ = capacity_.IsZero()
                  ? c
                  : Bandwidth::BitsPerSecond(0.75 * capacity_.bps() + 0.25 * c.bps());
  VLOG(2) << "bbr " << this << " probe gamma=" << gamma << " g=" << g << " share=" << share
          << " c=" << c.bps() / 1e9 << " cap=" << capacity_.bps() / 1e9;
}

void BbrController::EndRound(Time now) {
  VLOG(2) << "bbr " << this << " t=" << now.seconds() << " round=" << round_count_ << " "
          << ModeName() << " gain=" << pacing_gain_ << " bw=" << max_bw_.Get().bps() / 1e9
          << " rmax=" << round_max_rate_.bps() / 1e9 << " base=" << up_base_rate_.bps() / 1e9
          << " minrtt=" << min_rtt_.milliseconds() << " rminrtt=" << round_min_rtt_.milliseconds()
          << " lost=" << round_lost_packets_ << " inflight=" << bytes_in_flight_ / 1e6
          << " bdp=" << Bdp() / 1e6 << " ev=" << congestion_events_ << "/" << queue_resets_ << "/" << gradient_scalings_;
  const ByteCount total = round_acked_ + round_lost_;
  last_loss_rate_ = total > 0 ? static_cast<double>(round_lost_) / static_cast<double>(total) : 0;
  // Signals of a round that still carries packets sent before the last reduction were
  // already answered by it.
  const bool answered =
      last_congestion_round_ != ~uint64_t{0} && round_count_ <= last_congestion_round_ + 1;
  if (!answered && round_lost_packets_ >= params_.min_loss_packets &&
      last_loss_rate_ > loss_threshold_) {
    Congestion(now, Signal::kLossRate, params_.loss_beta);
  }
  // A queue that persisted through a whole round trip (even the round's smallest RTT is
  // inflated) while no congestion was signalled: the flows sharing the bottleneck pace
  // above its rate in sum (their max filters remember shares they no longer have).
  // Re-anchor the model on the delivery rate, without a multiplicative cut.
  const bool queue_answered =
      last_congestion_round_ != ~uint64_t{0} &&
      round_count_ < last_congestion_round_ + params_.standing_queue_rounds;
  if (!queue_answered && mode_ == Mode::kProbeBw && phase_ != Phase::kUp &&
      !round_min_rtt_.IsInfinite() &&
      !min_rtt_.IsInfinite() && sent_gain_prev_ == 1.0 && !round_max_rate_.IsZero() &&
      round_min_rtt_ > min_rtt_ + min_rtt_.Scaled(params_.standing_queue_fraction) + ack_delay_) {
    Congestion(now, Signal::kStandingQueue, params_.standing_queue_beta);
  }
  round_min_rtt_ = Duration::Infinite();
  // Delay gradient: the mean RTT of this round against the previous one. While every
  // flow on the bottleneck cruises at gain 1, a queue that grows by x per round means the
  // flows pace (1 + x) above its rate in sum; scaling every flow's model by 1 / (1 + x)
  // stops the growth and keeps the ratios between the flows' models (which carry what
  // each flow's max filter remembers of its probes, the force that equalises shares).
  if (round_rtt_count_ > 0) {
    const double mean = round_rtt_sum_ns_ / static_cast<double>(round_rtt_count_);
    if (params_.gradient_deadband > 0 && prev_round_mean_rtt_ns_ > 0 &&
        mode_ == Mode::kProbeBw && phase_ == Phase::kCruise && sent_gain_prev_ == 1.0 &&
        assessed_gain_ == 1.0) {
      const double rho = prev_round_mean_rtt_ns_ / mean;
      if (rho < 1 - params_.gradient_deadband) {
        max_bw_.Scale([rho](Bandwidth b) { return b.Scaled(rho); });
        ++gradient_scalings_;
      }
    }
    prev_round_mean_rtt_ns_ = mean;
  }
  round_rtt_sum_ns_ = 0;
  round_rtt_count_ = 0;
  const uint64_t ecn_packets = round_ce_ + round_ect_;
  if (ecn_packets > 0) {
    last_ce_fraction_ = static_cast<double>(round_ce_) / static_cast<double>(ecn_packets);
    ecn_alpha_ = (1 - params_.ecn_gain) * ecn_alpha_ + params_.ecn_gain * last_ce_fraction_;
    if (round_ce_ > 0 && !answered) {
      if (mode_ == Mode::kStartup) {
        // A few marks while the queue passes the threshold are expected; a marked share
        // this large means startup has filled the pipe.
        if (last_ce_fraction_ >= params_.startup_ce_exit) {
          Congestion(now, Signal::kEcn, params_.loss_beta);
        }
      } else {
        Congestion(now, Signal::kEcn, 1 - ecn_alpha_ / 2);
      }
    }
  }
  prev_round_max_rate_ = round_max_rate_;
  round_max_rate_ = Bandwidth::Zero();
  round_acked_ = 0;
  round_lost_ = 0;
  round_lost_packets_ = 0;
  round_ce_ = 0;
  round_ect_ = 0;
}

void BbrController::UpdateMinRtt(Time now, Duration rtt) {
  const bool expired = !min_rtt_.IsInfinite() && now > min_rtt_stamp_ + params_.min_rtt_window;
  if (rtt <= min_rtt_ || expired) {
    min_rtt_ = rtt;
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
  round_max_rate_ = std::max(round_max_rate_, rs.delivery_rate);
  max_rate_since_congestion_ = std::max(max_rate_since_congestion_, rs.delivery_rate);
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
      if (full_bw_reached_) {
        mode_ = Mode::kDrain;
        pacing_gain_ = params_.drain_pacing_gain;
        cwnd_gain_ = params_.startup_cwnd_gain;
      }
      break;
    case Mode::kDrain:
      break;
    case Mode::kProbeBw: {
      const bool full_length = now - phase_start_ > min_rtt_;
      switch (phase_) {
        case Phase::kDown: {
          const bool drained = bytes_in_flight_ <= Bdp() &&
                               (!params_.down_until_empty ||
                                latest_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_);
          const Duration max_len =
              min_rtt_.Scaled(deep_drain_ ? params_.deep_drain_max_rtts : params_.down_max_rtts);
          if (now - phase_start_ > max_len || drained) EnterPhase(now, Phase::kCruise);
          break;
        }
        case Phase::kCruise:
          if (round_start_ && round_count_ >= next_probe_round_) {
            EnterPhase(now, Phase::kUp);
          }
          break;
        case Phase::kUp:
          if (params_.up_assess) {
          if (round_start_ && assessed_gain_ > 1.0) {
            if (prev_round_max_rate_ >= up_base_rate_.Scaled(params_.probe_up_growth)) {
              up_base_rate_ = prev_round_max_rate_;
              pacing_gain_ = ProbeGain();
            } else {
              EnterPhase(now, Phase::kDown);
              break;
            }
          } else if (round_start_) {
            up_base_rate_ = std::max(up_base_rate_, prev_round_max_rate_);
          }
          if (pacing_gain_ > 1.0 && full_length &&
              bytes_in_flight_ >= Bdp(params_.probe_up_gain)) {
            pacing_gain_ = 1.0;
          }
          } else if (full_length && bytes_in_flight_ >= Bdp(up_gain_)) {
            // The pipe plus a quarter BDP of queue is in flight. While the link has room
            // the bandwidth estimate (and so the BDP) keeps growing with the probe, and
            // this does not happen: the probe goes on, 1.25x per round.
            ScheduleProbe();
            EnterPhase(now, Phase::kDown);
            break;
          }
          if (round_count_ - phase_start_round_ > params_.max_up_rounds) {
            ScheduleProbe();
            EnterPhase(now, Phase::kDown);
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
  // startup that ends on this ACK can drain at once).
  if (mode_ == Mode::kDrain && bytes_in_flight_ <= Bdp()) EnterProbeBw(now, Phase::kCruise);
}

void BbrController::EnterProbeBw(Time now, Phase phase) {
  mode_ = Mode::kProbeBw;
  ScheduleProbe();
  EnterPhase(now, phase);
}

void BbrController::ScheduleProbe() {
  // The next probe comes a random number of rounds from now (flows sharing a link
  // probe at different times), counted from the end of the previous one.
  next_probe_round_ = round_count_ + 1 + params_.cruise_rounds_min +
                      rng_.UniformInt(params_.cruise_rounds_max - params_.cruise_rounds_min + 1);
}

void BbrController::EnterPhase(Time now, Phase phase) {
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
      pacing_gain_ = ProbeGain();
      up_gain_ = pacing_gain_;
      // What the link delivered at gain 1 just before: the probe's baseline.
      up_base_rate_ = std::max(round_max_rate_, prev_round_max_rate_);
      break;
  }
}

Bandwidth BbrController::RecentDeliveryRate(Time now) const {
  // What the path delivered lately, averaged (a max of per-ACK samples overshoots, and
  // samples right after a rate drop still span the old rate): this round so far if it
  // is long enough to mean something, else the last complete round.
  const Duration d = now - round_start_time_;
  if (!min_rtt_.IsInfinite() && d >= min_rtt_ / 4 && round_acked_ > 0) {
    return Bandwidth::FromBytesAndDuration(round_acked_, d);
  }
  return pair_delivered_;
}

double BbrController::ProbeGain() const {
  if (params_.binomial_c > 0 && !max_bw_.Get().IsZero() && !min_rtt_.IsInfinite()) {
    const double unit = static_cast<double>(max_datagram_) * 8 / min_rtt_.seconds();
    const double g = 1 + params_.binomial_c * std::sqrt(unit / max_bw_.Get().bps());
    return std::clamp(g, params_.probe_up_gain, params_.max_probe_gain);
  }
  if (params_.probe_success_gain > 0) {
    return probe_succeeded_ ? params_.probe_success_gain : params_.probe_up_gain;
  }
  const Bandwidth bw = max_bw_.Get();
  if (capacity_.IsZero() || bw.IsZero()) return params_.probe_up_gain;
  // At least an absolute share of the capacity: every flow on the link probes by the
  // same amount, so small flows gain more than large ones (additive increase).
  const double additive = 1 + params_.probe_capacity_share * capacity_.bps() / bw.bps();
  return std::min(std::max(params_.probe_up_gain, additive), params_.max_probe_gain);
}

void BbrController::EnterProbeRtt(Time now) {
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

void BbrController::Congestion(Time now, Signal signal, double factor) {
  if (round_count_ == last_congestion_round_) return;  // once per round
  last_congestion_round_ = round_count_;
  last_congestion_time_ = now;
  if (signal == Signal::kEcn) {
    ++ecn_reductions_;
  } else if (signal == Signal::kStandingQueue) {
    ++queue_resets_;
  } else {
    ++congestion_events_;
  }
  // Restart the model from what the network delivered lately, times the reduction: the
  // max filter would otherwise hold a rate the path no longer has (a rate step down, a
  // new competitor) for bw_window_rounds and keep the queue full all that time.
  const Bandwidth bw = max_bw_.Get();
  Bandwidth latest = params_.reset_from_avg ? RecentDeliveryRate(now)
                     : signal == Signal::kStandingQueue ? round_max_rate_
                     : params_.reset_from_since_congestion
                         ? max_rate_since_congestion_
                         : std::max(round_max_rate_, prev_round_max_rate_);
  if (latest.IsZero() || latest > bw) latest = bw;
  max_rate_since_congestion_ = Bandwidth::Zero();
  if (!latest.IsZero()) {
    max_bw_.Reset(latest.Scaled(factor), static_cast<int64_t>(round_count_));
  }
  if (signal != Signal::kStandingQueue) bw_valid_from_delivered_ = total_delivered_ + 1;
  switch (mode_) {
    case Mode::kStartup:
      full_bw_reached_ = true;
      mode_ = Mode::kDrain;
      pacing_gain_ = params_.drain_pacing_gain;
      cwnd_gain_ = params_.startup_cwnd_gain;
      break;
    case Mode::kProbeBw:
      // A standing queue re-anchors the model but keeps the probing cycle going: the
      // cycle is what lets the flows' shares converge.
      if (signal != Signal::kStandingQueue) ScheduleProbe();
      if (signal != Signal::kStandingQueue || params_.standing_queue_down) {
        EnterPhase(now, Phase::kDown);
        if (signal == Signal::kStandingQueue) {
          // Drain the queue the flows built together, deep enough that it empties and
          // every flow (also one that started behind the queue) sees the path's RTT.
          pacing_gain_ = params_.standing_queue_drain_gain;
          deep_drain_ = true;
        }
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
  const Bandwidth bw = max_bw_.Get();
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
