#include "transport/core/recv/ack_tracker.h"

#include <algorithm>

namespace longhaul {

bool AckTracker::OnPacket(Time now, PacketNumber pn, bool ack_eliciting, bool ce, bool ect,
                          bool recovered) {
  bool in_order = true;
  if (ranges_.empty()) {
    ranges_.push_back({pn, pn});
    largest_time_ = now;
  } else if (pn > ranges_.back().high) {
    PacketNumber high = ranges_.back().high;
    if (pn == high + 1) {
      ranges_.back().high = pn;
    } else {
      // A gap: packets high+1 .. pn-1 are missing (for now).
      AccountGap(high + 1, pn - 1);
      ranges_.push_back({pn, pn});
      in_order = false;
      if (ranges_.size() > max_ranges_ * 4) ranges_.pop_front();
    }
    largest_time_ = now;
  } else {
    // Older than the largest: a duplicate or a late (reordered) packet.
    in_order = false;
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pn,
                               [](PacketNumber v, const wire::AckRange& r) { return v < r.low; });
    // `it` is the first range with low > pn; the candidate containing pn is before it.
    if (it != ranges_.begin() && std::prev(it)->high >= pn) return false;  // duplicate
    if (it == ranges_.begin() && pn < ranges_.front().low && ranges_.size() >= max_ranges_ * 4) {
      // Below everything we still track: cannot tell; accept without recording.
    } else {
      // pn fills (part of) the gap between prev and it.
      bool joins_prev = it != ranges_.begin() && std::prev(it)->high + 1 == pn;
      bool joins_next = it != ranges_.end() && it->low == pn + 1;
      if (it != ranges_.begin() && !recovered) {
        // It was counted missing when the gap opened; undo for this packet.
        if (missing_ > 0) --missing_;
        if (joins_prev && joins_next) {
          if (bursts_ > 0) --bursts_;  // the gap closed entirely
        } else if (!joins_prev && !joins_next) {
          ++bursts_;  // the gap split in two
        }
      }
      if (joins_prev && joins_next) {
        std::prev(it)->high = it->high;
        ranges_.erase(it);
      } else if (joins_prev) {
        std::prev(it)->high = pn;
      } else if (joins_next) {
        it->low = pn;
      } else {
        ranges_.insert(it, wire::AckRange{pn, pn});
      }
    }
  }
  if (!recovered) ++received_;
  if (ce) ++ce_;
  else if (ect) ++ect0_;
  if (ack_eliciting) {
    if (unacked_eliciting_ == 0) ack_deadline_ = now + max_ack_delay_;
    ++unacked_eliciting_;
    if (unacked_eliciting_ >= ack_every_ || !in_order || ce) ack_now_ = true;
  }
  return true;
}

bool AckTracker::IsDuplicate(PacketNumber pn) const {
  if (ranges_.empty() || pn > ranges_.back().high) return false;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pn,
                             [](PacketNumber v, const wire::AckRange& r) { return v < r.low; });
  return it != ranges_.begin() && std::prev(it)->high >= pn;
}

void AckTracker::AccountGap(PacketNumber low, PacketNumber high) {
  missing_ += high - low + 1;
  ++bursts_;
}

void AckTracker::BuildAck(Time now, wire::AckFrame* ack,
                          std::vector<wire::AckRange>* ranges) const {
  ranges->clear();
  size_t n = std::min(ranges_.size(), max_ranges_);
  for (size_t i = 0; i < n; ++i) ranges->push_back(ranges_[ranges_.size() - 1 - i]);
  ack->largest = ranges_.back().high;
  Duration delay = now - largest_time_;
  ack->ack_delay_us = delay > Duration::Zero() ? static_cast<uint64_t>(delay.ns() / 1000) : 0;
  ack->ecn_ce = ce_;
  ack->ecn_ect0 = ect0_;
}

void AckTracker::OnAckSent() {
  unacked_eliciting_ = 0;
  ack_now_ = false;
  ack_deadline_ = Time::Infinite();
}

}  // namespace longhaul
