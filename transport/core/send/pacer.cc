#include "transport/core/send/pacer.h"

#include <algorithm>

namespace longhaul {

void Pacer::OnPacketSent(Time now, ByteCount bytes, Bandwidth rate) {
  const int64_t now_ps = now.ns() * 1000;
  // Credit for missed slots only while busy: after an idle spell pacing restarts now.
  if (idle_) {
    next_send_ps_ = std::max(next_send_ps_, now_ps);
    idle_ = false;
  }
  if (next_send_ps_ < now_ps - max_burst_ps_) next_send_ps_ = now_ps - max_burst_ps_;
  const double bps = rate.bps();
  if (bps > 0) {
    // Floating point: 8e12 x bytes overflows nothing and keeps sub-nanosecond spacing.
    next_send_ps_ += static_cast<int64_t>(static_cast<double>(bytes + kWireOverhead) * 8e12 / bps);
  }
}

PacerDebugState Pacer::debug_state() const {
  PacerDebugState s;
  s.release_time = ReleaseTime();
  s.release_time_ps = next_send_ps_;
  s.idle = idle_;
  return s;
}

}  // namespace longhaul
