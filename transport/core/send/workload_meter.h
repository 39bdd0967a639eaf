// What the application's sends look like, for the FEC auto policy: the recent message
// size in packets (its per-message repair target counts per message) and the messages
// submitted per round trip (delivery is in order, so a message waiting for a repair
// holds back the ones submitted behind it). Not thread-safe; owned by the Connection.
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/base/units.h"

namespace longhaul {

class WorkloadMeter {
 public:
  void OnSend(ByteCount size, ByteCount segment) {
    const double packets = std::max(1.0, static_cast<double>(size) / static_cast<double>(segment));
    message_packets_ = message_packets_ == 0 ? packets : 0.9 * message_packets_ + 0.1 * packets;
    ++messages_;
  }
  // Updates the rate once at least `srtt` has passed since the last update.
  void Update(Time now, Duration srtt) {
    if (now - mark_time_ < srtt || now <= mark_time_) return;
    const double per_rtt = static_cast<double>(messages_ - mark_messages_) * srtt.seconds() /
                           (now - mark_time_).seconds();
    per_rtt_ = mark_time_ == Time::Zero() ? per_rtt : 0.5 * per_rtt_ + 0.5 * per_rtt;
    mark_time_ = now;
    mark_messages_ = messages_;
  }
  uint64_t message_packets() const { return static_cast<uint64_t>(message_packets_ + 0.5); }
  double messages_per_rtt() const { return per_rtt_; }

 private:
  double message_packets_ = 0;  // EWMA of message sizes, packets
  uint64_t messages_ = 0;       // submitted
  uint64_t mark_messages_ = 0;
  Time mark_time_;
  double per_rtt_ = 0;
};

}  // namespace longhaul
