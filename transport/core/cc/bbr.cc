// BbrController: construction, the ACK entry point and rounds. bbr.h describes the
// model and lists the files of the other concerns; docs/congestion-control.md has the
// reasons and measurements. Each file says why where it departs from BBRv1.

#include "transport/core/cc/bbr.h"

#include <algorithm>

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
      pacing_gain_(params.startup.pacing_gain),
      cwnd_gain_(params.startup.cwnd_gain),
      max_bw_(params.model.bw_window_rounds),
      ecn_alpha_(params.ecn.alpha_init) {
  // The peer acknowledges every ack_every packets (or after max_ack_delay), so delivery
  // arrives in steps; like BBR's send quanta, the window gets room for a few of them.
  ack_allowance_ = std::min<ByteCount>(2 * config.ack_every, 256) * max_datagram_;
  // The first round trip: initial_rate's window over the assumed RTT (at least the
  // initial packets), paced at initial_rate, or the packets over the assumed RTT at
  // startup gain where that is faster. With rate_min, from that bandwidth (its BDP).
  const ByteCount initial_packets = params_.model.initial_cwnd_packets * max_datagram_;
  const ByteCount initial_rate_window =
      static_cast<ByteCount>(config.initial_rate.bps() / 8 * initial_rtt_.seconds());
  cwnd_ = std::min<ByteCount>(
      std::max<ByteCount>({initial_packets, initial_rate_window,
                           rate_min_.IsZero() ? 0 : Bdp(params_.startup.cwnd_gain)}),
      window_limit_);
  pacing_rate_ = std::max(
      Bandwidth::FromBytesAndDuration(initial_packets, initial_rtt_).Scaled(pacing_gain_),
      config.initial_rate);
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
  s.competed = competing_entries_ > 0;
  return s;
}

void BbrController::OnPacketSent(Time now, ByteCount bytes, ByteCount bytes_in_flight,
                                 bool is_app_limited) {
  bytes_in_flight_ = bytes_in_flight;
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
  UpdateEcnAlpha();
  VLOG(2) << "bbr " << this << " t=" << now.seconds() << " round=" << round_count_ << " "
          << ModeName() << " gain=" << pacing_gain_ << " bw=" << max_bw_.Get().bps() / 1e9
          << " delivered=" << last_round_delivery_.bps() / 1e9
          << " min_rtt=" << min_rtt_.milliseconds()
          << " round_min_rtt=" << round_min_rtt_.milliseconds() << " lost=" << round_lost_packets_
          << " ce=" << round_ce_ << " inflight=" << bytes_in_flight_ << " bdp=" << Bdp()
          << " app_limited=" << round_app_limited_;

  // This round acknowledged what the previous round sent; its signals were answered
  // already if that round started before the last response.
  const bool answered =
      (last_congestion_round_ != ~uint64_t{0} && round_count_ <= last_congestion_round_ + 1) ||
      round_had_timeout_;
  round_had_timeout_ = false;
  const bool sent_at_gain_1 = sent_gain_prev_ <= 1.0;
  NoteRoundQueue(now);
  if (!answered) RespondToRound(now, sent_at_gain_1);
  loss_free_rounds_ = round_lost_packets_ > 0 ? 0 : loss_free_rounds_ + 1;
  ResetRoundCounters();
}

void BbrController::ResetRoundCounters() {
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

void BbrController::UpdateMode(const AckEvent& ack) {
  const Time now = ack.now;
  switch (mode_) {
    case Mode::kStartup:
      UpdateStartup(ack);
      break;
    case Mode::kDrain:
      break;
    case Mode::kProbeBw:
      UpdateProbeBw(now);
      break;
    case Mode::kProbeRtt:
      UpdateProbeRtt(now);
      break;
  }
  // Drain ends once the queue startup built is gone (checked after the switch so that a
  // startup that ends on this ACK can end its drain at once).
  if (mode_ == Mode::kDrain) UpdateDrain(now);
}

}  // namespace longhaul
