// RTT statistics from a set of round-trip samples (probe echoes): the order statistics
// the tuner needs (min ~ propagation delay, p50, p90, p99, max), the mean, the mean
// absolute deviation, and jitter = p99 - p50 (reference B4: "jitter ~ p99 - p50").
//
// Percentiles are nearest-rank: the smallest sample with at least q of the samples at or
// below it, so every reported value is an observed one.
//
// Pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "transport/base/units.h"

namespace longhaul::tuner {

struct RttSummary {
  uint64_t count = 0;
  Duration min;
  Duration p50;
  Duration p90;
  Duration p99;
  Duration max;
  Duration mean;
  Duration mean_deviation;  // mean |sample - mean|
  Duration jitter;          // p99 - p50

  std::string ToString() const;  // "min 58.01ms p50 58.2ms p99 58.9ms jitter 0.7ms (n=100)"
};

// Nearest-rank percentile (q in [0, 1]) of unsorted samples; InvalidArgument when empty.
absl::StatusOr<Duration> RttPercentile(std::span<const Duration> samples, double q);

// InvalidArgument when `samples` is empty or holds a negative value.
absl::StatusOr<RttSummary> SummarizeRtt(std::span<const Duration> samples);

}  // namespace longhaul::tuner
