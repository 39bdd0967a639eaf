// BbrController's PROBE_RTT (bbr.h): after params.model.min_rtt_window without an RTT
// sample within min_rtt_tolerance of min RTT, the window drops to
// params.probe_rtt.cwnd_gain x BDP (0.5; not BBRv1's 4 packets: a 725 MB pipe stays half
// full) for max(params.probe_rtt.duration, a round), so the queue empties and the path's
// RTT shows. While competing the min RTT does not expire (bbr_model.cc).

#include <algorithm>

#include "transport/core/cc/bbr.h"

namespace longhaul {

void BbrController::UpdateProbeRtt(Time now) {
  const ByteCount target = std::max(MinCwnd(), Bdp(params_.probe_rtt.cwnd_gain));
  if (probe_rtt_done_.IsInfinite()) {
    if (bytes_in_flight_ <= target + max_datagram_) {
      // In flight is down to the probe window: hold it for max(duration, a round).
      probe_rtt_done_ = now + params_.probe_rtt.duration;
      probe_rtt_round_done_ = false;
      next_round_delivered_ = total_delivered_;
    }
  } else {
    if (round_start_) probe_rtt_round_done_ = true;
    if (probe_rtt_round_done_ && now >= probe_rtt_done_) ExitProbeRtt(now);
  }
}

void BbrController::EnterProbeRtt(Time now) {
  if (probe_down_end_.IsInfinite()) probe_down_end_ = now;
  prior_cwnd_ = cwnd_;
  mode_ = Mode::kProbeRtt;
  pacing_gain_ = 1.0;
  cwnd_gain_ = params_.probe_rtt.cwnd_gain;
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
    pacing_gain_ = params_.startup.pacing_gain;
    cwnd_gain_ = params_.startup.cwnd_gain;
  }
}

}  // namespace longhaul
