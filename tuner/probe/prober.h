// The prober: measures a path to a probe responder over real UDP and fits a
// LinkEstimate (tuner/model/link_estimate.h) for the tuner. Phases, in order, each
// bounded (docs/tuning.md, "Probe"):
//
//  1. hello      the responder answers (3 tries, 1 s apart) or the probe fails
//  2. rtt        small echoes at a fixed spacing: min / p50 / p99 RTT of the idle path
//  3. rate       trains at rising rates (tuner/estimate/rate.h: x2 until saturated,
//                then 1.25 x the best, BBR's full-pipe rule) of 9000-byte packets; the
//                responder times the arrivals (kernel timestamps) and reports each
//                train's delivery rate. If nothing of a train arrives (the path's MTU is
//                smaller), the path-MTU search runs first and the trains use its size
//  4. pmtu       DF-set echoes of a ladder of sizes (tuner/estimate/pmtu_search.h),
//                paced at half the measured rate so the bottleneck queue never drops
//                them for being queued behind each other
//  5. loss       one long paced train at loss_load x the rate (no queue drops) with
//                small packets for many samples; the responder returns the loss-trace
//                counts (Gilbert fits), reorder extent and duplicates; every k-th
//                packet is echoed for the RTT under load
//
// Bounded by max_duration (default 10 s) and max_bytes (wire bytes sent); each phase
// has a share of the time and stops early when it runs out; progress lines go to
// `progress`. Traffic goes only to the target.
//
// The RTT, rate and loss phases' decisions (schedules, waits, what a report means) are
// tuner/probe/probe_phases.h, unit-tested without sockets; this file is their I/O loop.
//
// Thread-safety: RunProbe is reentrant (its own socket); it blocks the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/base/units.h"
#include "tuner/estimate/loss_fit.h"
#include "tuner/estimate/rate.h"
#include "tuner/estimate/reorder.h"
#include "tuner/estimate/rtt_stats.h"
#include "tuner/model/link_estimate.h"

namespace longhaul::tuner {

struct ProbeOptions {
  std::string target;                          // HOST:PORT of the responder
  Duration max_duration = Duration::Seconds(10);
  ByteCount max_bytes = ByteCount{1} << 30;    // wire bytes the probe may send
  Bandwidth start_rate = Bandwidth::Mbps(50);  // first train
  Bandwidth max_rate = Bandwidth::Gbps(100);   // trains never go faster
  Duration train_duration = Duration::Milliseconds(40);
  int rtt_probes = 40;
  Duration rtt_spacing = Duration::Milliseconds(5);
  bool pmtu = true;
  uint32_t max_mtu = 0;                        // 0: the local interface's MTU
  double loss_load = 0.8;                      // loss phase rate / estimated rate
  uint32_t loss_packets_per_s = 20000;         // loss phase packet-rate target
  std::function<void(const std::string&)> progress;
};

struct ProbeReport {
  LinkEstimate estimate;
  std::string responder;          // address probed
  RttSummary rtt_idle;
  RttSummary rtt_loaded;          // count 0 if no loaded samples
  uint32_t local_mtu = 0;
  uint32_t pmtu = 0;              // 0: not measured
  int pmtu_rounds = 0;
  std::vector<TrainResult> trains;
  std::string rate_stop_reason;
  bool rate_saturated = false;
  double max_delivery_bps = 0;
  int short_trains = 0;           // trains sent at < 90 % of their target rate
  bool host_limited = false;      // so many that the host, not the path, set the pace
  uint32_t train_payload_bytes = 0;
  LossEstimate loss;
  ReorderEstimate reorder;
  uint64_t duplicates = 0;
  uint64_t responder_drops = 0;   // the responder's own socket drops in the loss phase
  double loss_phase_rate_bps = 0;
  double loss_phase_s = 0;
  uint32_t loss_phase_payload_bytes = 0;
  Duration timer_late_p99;        // how late the sender's sleeps ended (host load), p99
  double elapsed_s = 0;
  ByteCount wire_bytes_sent = 0;
  uint64_t packets_sent = 0;
  std::vector<std::string> notes;  // phases cut short, fallbacks
};

// Errors: InvalidArgument for bad options (target syntax, port 0, a target that is only
// IPv6: the probe measures IPv4 paths); NotFound when the target's host does not resolve
// (net::Resolve); Unavailable when the responder does not answer or refuses; other errors
// from the socket.
absl::StatusOr<ProbeReport> RunProbe(const ProbeOptions& options);

}  // namespace longhaul::tuner
