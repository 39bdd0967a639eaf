#include "tuner/estimate/reorder.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace longhaul::tuner {

std::string ReorderEstimate::ToString() const {
  if (reordered == 0) return absl::StrFormat("no reordering in %d packets", packets);
  return absl::StrFormat("%d of %d packets reordered (%.3g), extent up to %d packets / %.3fms",
                         reordered, packets, reordered_fraction(), max_extent_packets,
                         max_late.milliseconds());
}

void ReorderTracker::OnArrival(uint64_t seq, Time now) {
  const uint64_t index = arrivals_++;
  ++est_.packets;
  if (history_.empty() || seq > history_.back().seq) {
    history_.push_back(Record{seq, index, now});
    if (history_.size() > max_history_) history_.pop_front();
    return;
  }
  // Overtaken: find the first record (in arrival order) whose seq exceeds ours. The
  // records' seqs increase, so that is a binary search.
  ++est_.reordered;
  auto it = std::upper_bound(history_.begin(), history_.end(), seq,
                             [](uint64_t s, const Record& r) { return s < r.seq; });
  if (it == history_.end()) return;  // cannot happen: back().seq > seq
  const uint64_t extent = index - it->index;
  const Duration late = now - it->at;
  est_.max_extent_packets = std::max(est_.max_extent_packets, extent);
  if (late > est_.max_late) est_.max_late = late;
}

}  // namespace longhaul::tuner
