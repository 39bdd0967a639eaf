// PathMtu; path_mtu.h describes the algorithm.
#include "transport/core/send/path_mtu.h"

#include <algorithm>

namespace longhaul {

PathMtu::PathMtu(ByteCount max_datagram)
    : configured_max_(max_datagram),
      max_(max_datagram),
      current_(max_datagram),
      low_(max_datagram),
      high_(max_datagram + 1) {}

void PathMtu::OnProbeTimeout() {
  if (current_ > kBaseDatagram) ++timeouts_;
}

void PathMtu::OnTimeoutProbeSent(PacketNumber pn, ByteCount bytes) {
  if (bytes > kBaseDatagram) {
    has_large_probe_ = true;
    large_probe_pn_ = pn;
    large_probe_acked_ = false;
    has_small_probe_ = false;
  } else if (has_large_probe_ && !has_small_probe_) {
    has_small_probe_ = true;
    small_probe_pn_ = pn;
  }
}

void PathMtu::OnPacketAcked(PacketNumber pn, ByteCount bytes) {
  if (bytes > kBaseDatagram) timeouts_ = 0;  // large packets pass
  if (has_large_probe_ && pn == large_probe_pn_) large_probe_acked_ = true;
  if (has_small_probe_ && pn == small_probe_pn_) small_probe_acked_now_ = true;
}

bool PathMtu::OnAckDone(Time now) {
  const bool evidence = small_probe_acked_now_ && !large_probe_acked_;
  small_probe_acked_now_ = false;
  if (!evidence || timeouts_ == 0 || current_ <= kBaseDatagram) return false;
  // The small probe passed, the large one sent just before it did not.
  ++black_holes_;
  timeouts_ = 0;
  has_large_probe_ = has_small_probe_ = false;
  high_ = current_;
  low_ = kBaseDatagram;
  current_ = kBaseDatagram;
  probe_outstanding_ = false;
  searching_ = true;
  next_search_ = now;
  FinishIfNarrow(now);
  return true;
}

ByteCount PathMtu::ProbeSize(Time now) const {
  if (probe_outstanding_ || now < next_search_) return 0;
  if (!searching_) return high_ > max_ ? 0 : max_;  // the raise timer: try the maximum
  const ByteCount mid = low_ + (high_ - low_) / 2;
  return std::max(mid, low_ + 1);
}

void PathMtu::OnProbeSent(Time now, PacketNumber pn, ByteCount size) {
  (void)now;
  probe_outstanding_ = true;
  probe_pn_ = pn;
  probe_size_ = size;
  ++probes_sent_;
}

bool PathMtu::OnProbeAcked(Time now, PacketNumber pn) {
  if (!probe_outstanding_ || pn != probe_pn_) return false;
  probe_outstanding_ = false;
  ++probes_acked_;
  const bool raised = probe_size_ > current_;
  low_ = std::max(low_, probe_size_);
  current_ = std::max(current_, probe_size_);
  if (high_ <= low_) high_ = max_ + 1;  // the raise timer's probe of the maximum passed
  if (!searching_) {
    // The raise timer's probe (of the maximum) passed: back to the configured size.
    high_ = max_ + 1;
    next_search_ = Time::Infinite();
  } else {
    FinishIfNarrow(now);
  }
  return raised;
}

void PathMtu::OnProbeLost(Time now, PacketNumber pn) {
  if (!probe_outstanding_ || pn != probe_pn_) return;
  probe_outstanding_ = false;
  ++probes_lost_;
  if (!searching_) {
    next_search_ = now + kRaiseInterval;  // the maximum still does not pass
    return;
  }
  high_ = std::min(high_, probe_size_);
  FinishIfNarrow(now);
}

void PathMtu::OnExternalLimit(Time now, ByteCount datagram) {
  const ByteCount limit = std::max(datagram, kBaseDatagram);
  if (limit >= current_ && limit >= high_) return;
  high_ = std::min(high_, limit + 1);
  current_ = std::min(current_, limit);
  low_ = std::min(low_, current_);
  probe_outstanding_ = false;
  searching_ = true;
  next_search_ = now;
  FinishIfNarrow(now);
}

void PathMtu::SetLimit(Time now, ByteCount datagram) {
  (void)now;
  // The driver knows what its datapath carries: taken as passing, with nothing to search.
  max_ = std::clamp<ByteCount>(datagram, 1, configured_max_);
  current_ = low_ = max_;
  high_ = max_ + 1;
  searching_ = false;
  next_search_ = Time::Infinite();
  probe_outstanding_ = false;
  // Black-hole evidence gathered at another size says nothing about this one.
  timeouts_ = 0;
  has_large_probe_ = has_small_probe_ = false;
  small_probe_acked_now_ = false;
}

void PathMtu::FinishIfNarrow(Time now) {
  if (!searching_ || high_ - low_ > kSearchPrecision) return;
  searching_ = false;
  // Found: current_ == low_. Unless that is the maximum, try the maximum again later.
  if (current_ >= max_) {
    high_ = max_ + 1;
    next_search_ = Time::Infinite();
  } else {
    next_search_ = now + kRaiseInterval;
  }
}

PathMtuDebugState PathMtu::debug_state() const {
  PathMtuDebugState s;
  s.current = current_;
  s.search_low = low_;
  s.search_high = high_;
  s.timeouts_without_large_ack = timeouts_;
  s.black_holes = black_holes_;
  s.probes_sent = probes_sent_;
  s.probes_acked = probes_acked_;
  s.probes_lost = probes_lost_;
  return s;
}

}  // namespace longhaul
