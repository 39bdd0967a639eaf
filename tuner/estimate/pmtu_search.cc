#include "tuner/estimate/pmtu_search.h"

#include <algorithm>
#include <set>

namespace longhaul::tuner {

PmtuSearch::PmtuSearch(const PmtuSearchOptions& options) : opt_(options) {
  opt_.max_size = std::max(opt_.max_size, opt_.min_size);
  opt_.sizes_per_round = std::max<uint32_t>(opt_.sizes_per_round, 1);
  opt_.granularity = std::max<uint32_t>(opt_.granularity, 1);
  hi_ = opt_.max_size + 1;
}

bool PmtuSearch::done() const {
  if (rounds_ >= opt_.max_rounds) return true;
  if (hi_ <= opt_.min_size) return true;  // even the smallest size failed
  const uint32_t floor = std::max(lo_, opt_.min_size - 1);
  return hi_ - floor <= opt_.granularity;
}

std::vector<uint32_t> PmtuSearch::NextRound() const {
  if (done()) return {};
  std::set<uint32_t> sizes;
  const uint32_t lo = lo_ == 0 ? opt_.min_size : lo_ + 1;  // first unconfirmed candidate
  const uint32_t hi = hi_ - 1;                             // last candidate
  if (lo > hi) return {};
  auto add = [&](uint32_t s) {
    if (s >= lo && s <= hi) sizes.insert(s);
  };
  if (rounds_ == 0) {
    // The likely answers first: the local maximum, jumbo and Ethernet frames, the
    // RFC 8899 base (1200), and the floor.
    add(hi);
    add(9000);
    add(1500);
    add(1200);
    add(lo);
  }
  // Evenly spaced in [lo, hi], always including hi.
  const uint32_t budget =
      opt_.sizes_per_round > sizes.size() ? opt_.sizes_per_round - sizes.size() : 0;
  const uint64_t span = static_cast<uint64_t>(hi) - lo + 1;
  if (budget > 0) {
    if (span <= budget) {
      for (uint32_t s = lo; s <= hi; ++s) sizes.insert(s);
    } else {
      for (uint32_t i = 1; i <= budget; ++i) {
        sizes.insert(static_cast<uint32_t>(lo + (span * i) / (budget + 1)));
      }
      if (sizes.size() < opt_.sizes_per_round) sizes.insert(hi);
    }
  }
  return std::vector<uint32_t>(sizes.begin(), sizes.end());
}

void PmtuSearch::OnRound(const std::vector<std::pair<uint32_t, bool>>& results) {
  ++rounds_;
  for (const auto& [size, ok] : results) {
    if (ok && size > lo_) lo_ = size;
  }
  // A size confirmed above an earlier failure: that failure was loss, forget it.
  if (hi_ <= lo_) hi_ = opt_.max_size + 1;
  for (const auto& [size, ok] : results) {
    if (!ok && size > lo_ && size < hi_) hi_ = size;
  }
}

}  // namespace longhaul::tuner
