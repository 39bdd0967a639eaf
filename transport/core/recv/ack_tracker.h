// The receiver's record of packet numbers it has seen, and when to acknowledge.
//
// Keeps the newest ranges of received packet numbers (bounded: the oldest are forgotten,
// since packet numbers are never reused and repairs travel in new packets, old holes
// never fill), decides when an ACK is due (every `ack_every` ack-eliciting packets, at
// once on a gap or reordering, otherwise within max_ack_delay), and counts ECN marks and
// loss statistics (packets missing and loss bursts) for the sender's FEC policy.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "transport/base/units.h"
#include "transport/wire/packet.h"

namespace longhaul {

class AckTracker {
 public:
  AckTracker(uint32_t ack_every, Duration max_ack_delay, size_t max_ranges)
      : ack_every_(ack_every), max_ack_delay_(max_ack_delay), max_ranges_(max_ranges) {}

  // True if `pn` was already received (as far as the tracked ranges tell).
  bool IsDuplicate(PacketNumber pn) const;
  // Records a packet. Returns false if it is a duplicate that was already seen.
  // `recovered`: rebuilt by FEC, not received: acknowledged like the others, but still
  // counted as lost by the channel in the loss statistics.
  bool OnPacket(Time now, PacketNumber pn, bool ack_eliciting, bool ce, bool ect,
                bool recovered = false);

  bool ack_pending() const { return unacked_eliciting_ > 0 || ack_now_; }
  // An ACK is due at `now` (threshold reached, gap seen, or delay expired).
  bool AckDue(Time now) const {
    return ack_now_ || (unacked_eliciting_ > 0 && now >= ack_deadline_);
  }
  Time ack_deadline() const {
    if (ack_now_) return Time::Zero();
    return unacked_eliciting_ > 0 ? ack_deadline_ : Time::Infinite();
  }

  bool has_packets() const { return !ranges_.empty(); }
  // Fills the ACK frame fields this tracker owns and the ranges (descending).
  void BuildAck(Time now, wire::AckFrame* ack, std::vector<wire::AckRange>* ranges) const;
  // Call after an ACK was sent.
  void OnAckSent();

  uint64_t packets_received() const { return received_; }
  // Gaps below the newest packet that stayed unfilled once `reorder_span` newer packets
  // arrived, counted once each; and runs of consecutive such packets.
  uint64_t packets_missing() const { return missing_; }
  uint64_t loss_bursts() const { return bursts_; }

 private:
  void AccountGap(PacketNumber low, PacketNumber high);

  uint32_t ack_every_;
  Duration max_ack_delay_;
  size_t max_ranges_;
  std::deque<wire::AckRange> ranges_;  // ascending, disjoint, non-adjacent
  Time largest_time_;
  uint32_t unacked_eliciting_ = 0;
  bool ack_now_ = false;
  Time ack_deadline_ = Time::Infinite();
  uint64_t ce_ = 0;
  uint64_t ect0_ = 0;
  uint64_t received_ = 0;
  uint64_t missing_ = 0;
  uint64_t bursts_ = 0;
};

}  // namespace longhaul
