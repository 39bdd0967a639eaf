// Pacer: when the next packet may leave, so that packets go out at the congestion
// controller's pacing rate instead of in window-sized bursts.
//
// Every paced packet (data, repair, FEC parity, probes) advances a release time by its
// wire time at the current rate: (datagram bytes + kWireOverhead) x 8 / rate. The IPv4
// and UDP headers are counted so that pacing at exactly the link's rate does not
// overfill it. The release time is kept in picoseconds: rates that do not divide a
// nanosecond (a 1500-byte datagram takes 407.47 ns at 30 Gbit/s) stay exact over
// millions of packets instead of drifting by the rounding.
//
// Catch-up: a driver that wakes late finds the release time in the past. While the
// sender is busy the missed slots may be used, as a burst of at most `pacing_burst`
// worth of packets (the release time never lags `now` by more than that). After an idle
// spell (the sender had nothing to send) there is no credit: pacing restarts at `now`.
//
// Pure state machine: time and rate come in with every call (the rate is whatever the
// controller says when the packet is sent). Not thread-safe; owned by the Connection.
// Model: quinn-proto's connection/pacing.rs, QUICHE's PacingSender.
#pragma once

#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

// What the pacer believes, for tests and debugging.
struct PacerDebugState {
  Time release_time;            // earliest time the next paced packet may leave
  int64_t release_time_ps = 0;  // the same, unrounded (picoseconds)
  bool idle = true;             // no catch-up credit: the next packet restarts pacing at now
};

class Pacer {
 public:
  // Bytes on the wire per datagram besides the UDP payload (IPv4 + UDP headers).
  static constexpr ByteCount kWireOverhead = 28;

  // `max_burst`: the most catch-up a late sender gets (TransportConfig::pacing_burst).
  explicit Pacer(Duration max_burst) : max_burst_ps_(max_burst.ns() * 1000) {}

  // Earliest time the next paced packet may be sent (rounded up to a nanosecond).
  // Time::Zero() before the first packet.
  Time ReleaseTime() const { return Time::FromNanoseconds((next_send_ps_ + 999) / 1000); }
  bool CanSend(Time now) const { return now >= ReleaseTime(); }

  // The sender has nothing ready (no data, no repair): the next packet gets no credit for
  // the slots missed meanwhile.
  void OnIdle() { idle_ = true; }

  // A paced datagram of `bytes` (UDP payload) left at `now` while the controller's rate
  // was `rate`. A zero rate paces nothing (the release time does not advance).
  void OnPacketSent(Time now, ByteCount bytes, Bandwidth rate);

  PacerDebugState debug_state() const;

 private:
  int64_t max_burst_ps_;
  int64_t next_send_ps_ = 0;  // release time of the next packet, picoseconds
  bool idle_ = true;
};

}  // namespace longhaul
