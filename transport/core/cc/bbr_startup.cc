// BbrController's STARTUP (bbr.h): pacing gain 2.77 (4 ln 2, BBRv3: the delivery rate
// doubles per round) until the bandwidth grew less than params.startup.full_bw_growth in
// full_bw_rounds rounds. A round whose loss rate exceeds cc_loss_threshold, or whose
// CE-marked share reaches params.startup.ce_exit, ends it too (bbr_congestion.cc,
// bbr_ecn.cc); loss with queueing delay does not (a new flow on a busy link sees the
// others' queue and overflow).

#include "transport/core/cc/bbr.h"

namespace longhaul {

void BbrController::CheckFullPipe() {
  if (full_bw_reached_ || max_bw_.empty()) return;
  const Bandwidth bw = max_bw_.Get();
  if (bw >= full_bw_.Scaled(params_.startup.full_bw_growth)) {
    full_bw_ = bw;
    full_bw_count_ = 0;
    return;
  }
  if (++full_bw_count_ >= params_.startup.full_bw_rounds) full_bw_reached_ = true;
}

void BbrController::UpdateStartup(const AckEvent& ack) {
  if (round_start_ && !ack.sample.is_app_limited) CheckFullPipe();
  if (full_bw_reached_) EnterDrain(ack.now);
}

}  // namespace longhaul
