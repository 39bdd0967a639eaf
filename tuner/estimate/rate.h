// Bottleneck-rate estimation from packet trains (reference B4, "the BBR approach"):
//
//   * A train is a burst of packets paced at a target rate; the receiver reports its
//     delivery rate (TrainReceipt below). Above the bottleneck rate the bottleneck spaces
//     the packets, so the delivery rate is the bottleneck rate whatever the target
//     (until the queue overflows, and even then the survivors are spaced at it).
//   * A train is saturated when the path delivered clearly less than the sender put in:
//     delivered < 95 % of the rate it was actually sent at, or < 95 % of its packets
//     arrived. A train the sender could not send at >= 80 % of its target (a busy host)
//     and that is not saturated proves nothing: it is repeated, and 3 such trains in a
//     row end the search ("sender limited", the estimate a lower bound).
//   * RateSearch plans the trains like BBR's startup: x2 after a train that was not
//     saturated, 1.25 x the best delivery rate after one that was, and declares the pipe
//     full once the best delivery rate grew by less than 25 % for 3 trains in a row
//     (bbr_full_bw_thresh 5/4, bbr_full_bw_cnt 3) and the two fastest saturated trains
//     agree within 10 % (one stretched train must not end the search). It also stops at
//     max_rate or max_trains.
//   * The estimate is the median delivery rate of the saturated trains, leaving out
//     those below 70 % of the fastest saturated one: robust to one stretched or
//     compressed train, and to an early train that looked saturated only because of
//     noise. The max over all trains (BBR's max filter) is reported too; a train that
//     arrived > 5 % faster than it was sent (compressed by a stalled relay or host) does
//     not count for it.
//
// Rates count wire bytes: UDP payload + IP/UDP headers, like the link model's `rate`.
// Pure state machine, no clock; not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/base/units.h"

namespace longhaul::tuner {

// What the receiver saw of one train.
//
// Two delivery rates: the span rate (wire bytes after the first arrival over the time
// from the first to the last arrival), and a least-squares fit of arrival time against
// the bytes received before each packet (slope = time per byte). A late first or last
// arrival (a relay or host that wakes late) moves the span rate by its lateness over
// the train's length; the fit spreads it over all packets. DeliveryRate() is the fit
// from 8 packets on, else the span rate.
struct TrainReceipt {
  uint64_t packets = 0;
  ByteCount wire_bytes = 0;        // all received packets, wire bytes
  ByteCount first_wire_bytes = 0;  // the first arrival's wire bytes
  Time first_arrival;
  Time last_arrival;
  // Least-squares sums over (x = bytes before the packet, y = arrival - first arrival, s).
  double sx = 0, sy = 0, sxx = 0, sxy = 0;

  void Add(ByteCount wire_bytes, Time now);  // in arrival order
  // Zero with fewer than two packets or a zero span.
  Bandwidth SpanRate() const;
  // Zero with fewer than 3 packets or a degenerate fit.
  Bandwidth FittedRate() const;
  Bandwidth DeliveryRate() const;
};

struct TrainResult {
  Bandwidth target_rate;    // the rate the sender aimed at
  Bandwidth send_rate;      // achieved by the sender (wire bytes / send span)
  Bandwidth delivery_rate;  // TrainReceipt::DeliveryRate()
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  Duration duration;        // send span
};

struct RateSearchOptions {
  Bandwidth start_rate = Bandwidth::Mbps(50);
  Bandwidth max_rate = Bandwidth::Gbps(400);
  double growth = 2.0;            // startup: next target = growth x target
  double probe_gain = 1.25;       // after saturation: target = probe_gain x best delivery
  double saturation = 0.95;       // saturated when delivered < saturation x send rate
  double loss_saturation = 0.95;  // ... or fewer than this fraction of packets arrived
  double sender_shortfall = 0.8;  // a train is short: the sender reached < this x target
  double full_pipe_growth = 1.25; // BBR: the best grew by less than this...
  int full_pipe_rounds = 3;       // ...for this many trains in a row
  int max_trains = 24;
};

class RateSearch {
 public:
  explicit RateSearch(const RateSearchOptions& options = {});

  // The target rate of the next train (meaningless once done()).
  Bandwidth NextRate() const { return next_; }
  void OnTrain(const TrainResult& train);
  bool done() const { return done_; }
  // Why it stopped: "full pipe", "max rate", "max trains", "sender limited"; empty while
  // running.
  const std::string& stop_reason() const { return stop_reason_; }

  // Median delivery rate of the saturated trains, or the best delivery rate when no
  // train saturated (then a lower bound; see saturated()).
  Bandwidth Estimate() const;
  Bandwidth MaxDelivery() const { return best_; }
  // The saturation test applied to one train (never true for a short train).
  bool Saturated(const TrainResult& t) const;
  // The sender fell short of the train's target (busy host): the train is repeated.
  bool Short(const TrainResult& t) const;
  bool saturated() const { return saturated_trains_ > 0; }
  const std::vector<TrainResult>& trains() const { return trains_; }

 private:
  RateSearchOptions opt_;
  Bandwidth next_;
  Bandwidth best_;
  Bandwidth full_bw_;
  int full_bw_count_ = 0;
  int saturated_trains_ = 0;
  int sender_limited_ = 0;
  bool done_ = false;
  std::string stop_reason_;
  std::vector<TrainResult> trains_;
};

}  // namespace longhaul::tuner
