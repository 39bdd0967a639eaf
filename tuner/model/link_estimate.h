// LinkEstimate: what the tuner knows about a path, whether measured by the probe
// (tuner/probe) or given as a link spec (`longhaul-tune --link=SPEC`). The model and the
// search work on it; ToLinkSpec() is the fitted link model the search checks its best
// candidates on in the simulator.
//
// Units in the types (Bandwidth = wire bits/s including IP/UDP headers, like the link
// model's rate; Duration; ByteCount) or the names. A value type; thread-safe as values.
#pragma once

#include <cstdint>
#include <string>

#include "transport/base/units.h"
#include "transport/sim/link_spec.h"

namespace longhaul::tuner {

struct LinkEstimate {
  Bandwidth rate;            // bottleneck rate (wire bits/s)
  Duration rtt;              // propagation round trip (probe: the minimum RTT)
  Duration rtt_p50;          // median RTT (>= rtt; includes jitter)
  Duration rtt_p99;          // 99th percentile (>= rtt_p50)
  double loss = 0.0;         // packet-loss rate
  double mean_burst = 1.0;   // mean loss-run length, packets (1 = random loss)
  double reorder = 0.0;      // fraction of packets that arrive after a later one
  Duration reorder_late;     // how late such a packet arrives (max seen)
  ByteCount mtu = 1500;      // path MTU (IP packet bytes)
  ByteCount overhead = 28;   // IP + UDP header bytes per datagram
  ByteCount queue_bytes = 0; // bottleneck buffer; 0 = unknown (assume one BDP)
  // Relative 95 % half-widths of the measured rate and loss (0 for a given spec).
  double rate_rel_error = 0.0;
  double loss_rel_error = 0.0;
  // Not the path's but the probing host's: how late its sleeping sender woke (p99); 0
  // if not measured. The search sizes the pacing burst from it.
  Duration host_timer_late;
  std::string source;        // "link rate=..." or "probe of HOST:PORT"

  // rate x rtt, bytes.
  ByteCount BdpBytes() const { return rate.BytesIn(rtt); }
  // queue_bytes, or one BDP (at least 64 KiB) like the link model's default.
  ByteCount QueueBytes() const;

  // From a spec: rtt = spec rtt; jitter (uniform [0, j] each way, order-preserving) puts
  // the p50 at rtt + j and the p99 at rtt + 1.86 j; burst <= 1 means random loss.
  static LinkEstimate FromLinkSpec(const sim::LinkSpec& spec);
  // The link model matching the estimate (the inverse of FromLinkSpec for the keys a
  // spec carries), seeded with `seed`.
  sim::LinkSpec ToLinkSpec(uint64_t seed = 1) const;

  // "rate=1gbit rtt=58ms (p50 58.1ms, p99 59ms) loss=1e-3 burst=1 mtu=9000 ..."
  std::string ToString() const;
};

}  // namespace longhaul::tuner
