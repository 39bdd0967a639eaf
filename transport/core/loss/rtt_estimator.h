// Round-trip time estimation as in RFC 9002 section 5: smoothed RTT, RTT variation,
// minimum RTT (over the connection's lifetime, or a window when the caller resets it)
// and the latest sample. ACK delay reported by the peer is subtracted when that does not
// take the sample below min_rtt.
#pragma once

#include <algorithm>

#include "transport/base/units.h"

namespace longhaul {

class RttEstimator {
 public:
  explicit RttEstimator(Duration initial_rtt)
      : srtt_(initial_rtt), rttvar_(initial_rtt / 2), initial_(initial_rtt) {}

  void OnSample(Duration rtt, Duration ack_delay) {
    if (rtt <= Duration::Zero()) rtt = Duration::Nanoseconds(1);
    latest_ = rtt;
    if (!has_sample_) {
      has_sample_ = true;
      min_rtt_ = rtt;
      srtt_ = rtt;
      rttvar_ = rtt / 2;
      return;
    }
    min_rtt_ = std::min(min_rtt_, rtt);
    Duration adjusted = rtt;
    if (rtt - ack_delay >= min_rtt_) adjusted = rtt - ack_delay;
    Duration diff = srtt_ > adjusted ? srtt_ - adjusted : adjusted - srtt_;
    rttvar_ = (rttvar_ * 3 + diff) / 4;
    srtt_ = (srtt_ * 7 + adjusted) / 8;
  }

  bool has_sample() const { return has_sample_; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  Duration min_rtt() const { return has_sample_ ? min_rtt_ : initial_; }
  Duration latest() const { return has_sample_ ? latest_ : initial_; }

 private:
  Duration srtt_;
  Duration rttvar_;
  Duration min_rtt_;
  Duration latest_;
  Duration initial_;
  bool has_sample_ = false;
};

}  // namespace longhaul
