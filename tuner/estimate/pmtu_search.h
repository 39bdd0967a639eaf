// Path-MTU search in the style of RFC 8899 (DPLPMTUD): probe packets of chosen sizes are
// sent with DF set and count as confirmed only when the peer acknowledges them at the
// packetization layer (the probe responder echoes them). A size is probed several times
// (MAX_PROBES = 3) per round, so random loss does not read as "too big".
//
// RFC 8899 searches one size at a time; over a 150 ms path that is slow, so each round
// probes a ladder of sizes at once (the largest local size, the common 1500 and 9000,
// and evenly spaced sizes in the open interval), then narrows the interval to
// (largest confirmed, smallest failed above it). With 15 sizes per round a 64 KiB range
// resolves to 1 byte in 4 rounds. A failure below a confirmed size is treated as loss.
//
// Sizes are IP packet sizes (the MTU sense): UDP payload + 28 for IPv4.
// Pure state machine; not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace longhaul::tuner {

struct PmtuSearchOptions {
  uint32_t min_size = 68;      // smallest size worth probing (IPv4 minimum MTU)
  uint32_t max_size = 65535;   // local limit (interface MTU, or 65535)
  uint32_t sizes_per_round = 15;
  uint32_t granularity = 1;    // done when (smallest failed - largest confirmed) <= this
  int max_rounds = 8;
};

class PmtuSearch {
 public:
  explicit PmtuSearch(const PmtuSearchOptions& options);

  // Sizes to probe this round (ascending, unique); empty once done().
  std::vector<uint32_t> NextRound() const;
  // Results of the round: (size, confirmed).
  void OnRound(const std::vector<std::pair<uint32_t, bool>>& results);
  bool done() const;
  int rounds() const { return rounds_; }

  // Largest confirmed size; 0 if none was.
  uint32_t pmtu() const { return lo_; }
  // Smallest size above pmtu() that failed; max_size + 1 if none did.
  uint32_t smallest_failed() const { return hi_; }

 private:
  PmtuSearchOptions opt_;
  uint32_t lo_ = 0;   // largest confirmed
  uint32_t hi_;       // smallest failed above lo_
  int rounds_ = 0;
};

}  // namespace longhaul::tuner
