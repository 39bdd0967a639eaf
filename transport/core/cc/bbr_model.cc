// BbrController's network model (bbr.h): the bottleneck bandwidth (a windowed max of
// delivery-rate samples over params.model.bw_window_rounds), the min RTT (refreshed by
// samples within min_rtt_tolerance, expiring after min_rtt_window), the BDP, and the
// pacing rate and congestion window they give.

#include <algorithm>

#include "glog/logging.h"
#include "transport/core/cc/bbr.h"

namespace longhaul {

ByteCount BbrController::Bdp(double gain) const {
  const Duration rtt = min_rtt_.IsInfinite() ? initial_rtt_ : min_rtt_;
  const Bandwidth bw = bandwidth();
  if (bw.IsZero()) {
    return static_cast<ByteCount>(gain * params_.model.initial_cwnd_packets * max_datagram_);
  }
  return static_cast<ByteCount>(gain * static_cast<double>(bw.BytesIn(rtt)));
}

double BbrController::PacketsPerMinRtt(Bandwidth bw) const {
  if (min_rtt_.IsInfinite()) return 0;
  return bw.bps() * min_rtt_.seconds() / (8.0 * static_cast<double>(max_datagram_));
}

bool BbrController::QueueEmpty() const {
  return !min_rtt_.IsInfinite() && latest_rtt_ <= min_rtt_.Scaled(1.05) + ack_delay_;
}

void BbrController::UpdateMinRtt(Time now, Duration rtt) {
  const bool expired =
      !min_rtt_.IsInfinite() && now > min_rtt_stamp_ + params_.model.min_rtt_window;
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
      flat_queue_gave_way_ = true;
      path_rtt_before_ = Duration::Infinite();
      path_rtt_suspect_ = false;
    } else if (expired) {
      path_rtt_before_ = Duration::Infinite();  // the new RTT held a whole window
      path_rtt_suspect_ = false;
    }
    min_rtt_ = rtt;
    min_rtt_stamp_ = now;
  } else if (rtt <= min_rtt_.Scaled(1 + params_.model.min_rtt_tolerance) + ack_delay_) {
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

void BbrController::UpdatePacingRate() {
  const Bandwidth bw = bandwidth();
  if (bw.IsZero()) return;
  const Bandwidth rate = bw.Scaled(pacing_gain_ * (1 - params_.model.pacing_margin));
  // Startup never slows down (a low early sample must not stall the ramp).
  if (full_bw_reached_ || rate > pacing_rate_) pacing_rate_ = rate;
}

void BbrController::UpdateCwnd(ByteCount bytes_acked) {
  const ByteCount target = TargetCwnd(cwnd_gain_);
  if (full_bw_reached_) {
    cwnd_ = std::min(cwnd_ + bytes_acked, target);
  } else if (cwnd_ < target ||
             total_delivered_ < params_.model.initial_cwnd_packets * max_datagram_) {
    cwnd_ += bytes_acked;
  }
  cwnd_ = std::max(cwnd_, MinCwnd());
  if (mode_ == Mode::kProbeRtt) {
    cwnd_ = std::min(cwnd_, std::max(MinCwnd(), Bdp(params_.probe_rtt.cwnd_gain)));
  }
  cwnd_ = std::min(cwnd_, window_limit_);
}

}  // namespace longhaul
