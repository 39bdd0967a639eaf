// BbrController's ECN response, DCTCP-like (bbr.h). Per round alpha <- (1 - g) alpha +
// g F, F the CE-marked share of the round's ECN-capable packets, g params.ecn.gain
// (1/16). A round with marks on packets sent without probing cuts the model by alpha/2
// (bbr_congestion.cc's cut, once per round); marks caused by our own probe end the probe,
// with no cut; in STARTUP a marked share of params.startup.ce_exit ends it.
// Alpha starts at params.ecn.alpha_init = 0, not DCTCP's 1: startup's exit answers the
// first marks (x params.congestion.loss_beta), and a first cut of alpha/2 = 50% for a
// handful of marks would halve a long fat pipe for many round trips.

#include "transport/core/cc/bbr.h"

namespace longhaul {

void BbrController::UpdateEcnAlpha() {
  const uint64_t ecn_packets = round_ce_ + round_ect_;
  if (ecn_packets > 0) {
    last_ce_fraction_ = static_cast<double>(round_ce_) / static_cast<double>(ecn_packets);
    ecn_alpha_ = (1 - params_.ecn.gain) * ecn_alpha_ + params_.ecn.gain * last_ce_fraction_;
  }
}

void BbrController::RespondToEcn(Time now, bool sent_at_gain_1) {
  if (mode_ == Mode::kStartup) {
    // A few marks as the queue passes the threshold are expected; a share this large
    // means startup has filled the pipe.
    if (last_ce_fraction_ >= params_.startup.ce_exit) {
      Congestion(now, Signal::kEcn, params_.congestion.loss_beta);
    }
  } else if (sent_at_gain_1) {
    Congestion(now, Signal::kEcn, 1 - ecn_alpha_ / 2);
  } else if (mode_ == Mode::kProbeBw && phase_ == Phase::kUp) {
    // Marks caused by our own probe: the probe found the limit. End it, no cut.
    ScheduleProbe();
    EnterPhase(now, Phase::kDown);
  }
}

}  // namespace longhaul
