// BbrController's DRAIN (bbr.h): pacing gain 1/2.77 until in flight is down to the BDP,
// emptying the queue startup's overshoot built; then PROBE_BW, cruising.

#include "transport/core/cc/bbr.h"

namespace longhaul {

void BbrController::EnterDrain(Time now) {
  // Draining is the answer to startup's overshoot: losses and marks of packets sent until
  // now are not congestion to answer again.
  last_congestion_round_ = round_count_;
  last_congestion_time_ = now;
  full_bw_reached_ = true;
  mode_ = Mode::kDrain;
  pacing_gain_ = params_.drain.pacing_gain;
  cwnd_gain_ = params_.startup.cwnd_gain;
}

void BbrController::UpdateDrain(Time now) {
  if (bytes_in_flight_ > Bdp()) return;
  // Packets sent until now may still meet the rest of startup's queue: their losses are
  // not a new congestion.
  last_congestion_time_ = now;
  EnterProbeBw(now, Phase::kCruise);
}

}  // namespace longhaul
