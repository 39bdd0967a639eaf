// Reorder extent from arrivals: packets carry send sequence numbers; a packet is
// reordered when it arrives after one with a larger sequence number (RFC 4737's
// "reordered" singleton). For each reordered packet:
//   extent (packets) = arrivals since the first arrival with a larger sequence number,
//                      so a packet overtaken by 5 later ones has extent 5;
//   late (time)      = now - arrival time of that first larger-sequence packet.
// The maxima bound what loss detection must tolerate (reorder_packets and
// reorder_rtt_fraction x RTT; reference B5: "NACK delay = measured extent x 1.5").
//
// Feed arrivals in arrival order; duplicates must be filtered by the caller (the probe
// responder does, with its received bitmap). Memory is bounded: only the last
// `max_history` increases of the running maximum are kept; an older (extremely late)
// packet is measured against the oldest kept one, which under-reports its extent.
//
// Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "transport/base/units.h"

namespace longhaul::tuner {

struct ReorderEstimate {
  uint64_t packets = 0;    // arrivals seen
  uint64_t reordered = 0;  // arrivals after a larger sequence number
  uint64_t max_extent_packets = 0;
  Duration max_late;       // longest time a reordered packet arrived after being overtaken
  double reordered_fraction() const {
    return packets ? static_cast<double>(reordered) / static_cast<double>(packets) : 0.0;
  }
  std::string ToString() const;
};

class ReorderTracker {
 public:
  explicit ReorderTracker(size_t max_history = 1 << 16) : max_history_(max_history) {}

  void OnArrival(uint64_t seq, Time now);
  const ReorderEstimate& estimate() const { return est_; }

 private:
  struct Record {
    uint64_t seq;      // new running maximum
    uint64_t index;    // arrival index when it arrived
    Time at;
  };
  size_t max_history_;
  std::deque<Record> history_;  // strictly increasing seq
  uint64_t arrivals_ = 0;
  ReorderEstimate est_;
};

}  // namespace longhaul::tuner
