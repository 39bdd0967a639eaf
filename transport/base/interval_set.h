// A set of disjoint half-open uint64 intervals [start, end), merged on insert.
//
// Used for acknowledged stream ranges, retransmission queues and received message bytes.
// Tuned for the transport's common case: inserts that extend the highest interval or
// start a new one above it are O(1) amortised; other inserts are O(log n). Not
// thread-safe.
#pragma once

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/container/btree_map.h"

namespace longhaul {

class IntervalSet {
 public:
  using Map = absl::btree_map<uint64_t, uint64_t>;  // start -> end

  bool empty() const { return map_.empty(); }
  size_t interval_count() const { return map_.size(); }
  // Sum of interval lengths.
  uint64_t total() const { return total_; }
  const Map& intervals() const { return map_; }
  void clear() {
    map_.clear();
    total_ = 0;
  }

  // Adds [start, end); returns how many values were not already in the set.
  uint64_t Add(uint64_t start, uint64_t end) {
    if (start >= end) return 0;
    // Fast path: extends or follows the last interval.
    if (!map_.empty()) {
      auto last = std::prev(map_.end());
      if (start >= last->first) {
        if (start > last->second) {
          map_.emplace_hint(map_.end(), start, end);
          total_ += end - start;
          return end - start;
        }
        if (end <= last->second) return 0;
        uint64_t added = end - last->second;
        last->second = end;
        total_ += added;
        return added;
      }
    } else {
      map_.emplace(start, end);
      total_ = end - start;
      return end - start;
    }
    // General case: merge with every interval that overlaps or touches [start, end).
    uint64_t covered = 0;
    auto it = map_.upper_bound(start);
    if (it != map_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= start) it = prev;
    }
    uint64_t new_start = start, new_end = end;
    while (it != map_.end() && it->first <= end) {
      uint64_t s = it->first, e = it->second;
      uint64_t os = s > start ? s : start, oe = e < end ? e : end;
      if (oe > os) covered += oe - os;
      if (s < new_start) new_start = s;
      if (e > new_end) new_end = e;
      total_ -= e - s;
      it = map_.erase(it);
    }
    map_.emplace(new_start, new_end);
    total_ += new_end - new_start;
    return (end - start) - covered;
  }

  // Removes [start, end) from the set.
  void Remove(uint64_t start, uint64_t end) {
    if (start >= end || map_.empty()) return;
    // Collect the overlapping intervals first: btree inserts invalidate iterators.
    auto it = map_.upper_bound(start);
    if (it != map_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > start) it = prev;
    }
    uint64_t head_start = 0, tail_end = 0;
    bool head = false, tail = false;
    while (it != map_.end() && it->first < end) {
      uint64_t s = it->first, e = it->second;
      total_ -= e - s;
      it = map_.erase(it);
      if (s < start) {
        head = true;
        head_start = s;
      }
      if (e > end) {
        tail = true;
        tail_end = e;
      }
    }
    if (head) {
      map_.emplace(head_start, start);
      total_ += start - head_start;
    }
    if (tail) {
      map_.emplace(end, tail_end);
      total_ += tail_end - end;
    }
  }

  bool Contains(uint64_t v) const {
    auto it = map_.upper_bound(v);
    if (it == map_.begin()) return false;
    --it;
    return v < it->second;
  }

  // True if [start, end) is entirely in the set.
  bool ContainsRange(uint64_t start, uint64_t end) const {
    if (start >= end) return true;
    auto it = map_.upper_bound(start);
    if (it == map_.begin()) return false;
    --it;
    return end <= it->second;
  }

  // True if some value of [start, end) is in the set.
  bool Overlaps(uint64_t start, uint64_t end) const {
    if (start >= end) return false;
    auto it = map_.upper_bound(start);
    if (it != map_.end() && it->first < end) return true;
    if (it == map_.begin()) return false;
    --it;
    return start < it->second;
  }

  // The interval containing or starting at the lowest value; requires !empty().
  std::pair<uint64_t, uint64_t> front() const { return *map_.begin(); }

  // Removes everything below `v`.
  void EraseBelow(uint64_t v) {
    while (!map_.empty()) {
      auto it = map_.begin();
      if (it->first >= v) break;
      if (it->second <= v) {
        total_ -= it->second - it->first;
        map_.erase(it);
      } else {
        uint64_t e = it->second;
        total_ -= v - it->first;
        map_.erase(it);
        map_.emplace(v, e);
        break;
      }
    }
  }

 private:
  Map map_;
  uint64_t total_ = 0;
};

}  // namespace longhaul
