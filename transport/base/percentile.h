// Percentiles of sorted samples, one definition for every report of completion times and
// RTTs (the simulator's scenarios, longhaul-perf, the comparison peers, the tuner).
//
// Two rules, because the reports have always used two:
//   nearest rank   the smallest sample with at least q of the samples at or below it;
//                  every value reported was observed (the simulator, the tuner's RTTs)
//   interpolated   linear interpolation between the two closest ranks, at position
//                  q x (n - 1) (numpy's default; longhaul-perf and the comparison peers)
//
// `sorted` must be in ascending order; q is a fraction, clamped to [0, 1]. Pure
// functions; thread-safe.
#pragma once

#include <cstddef>
#include <span>

namespace longhaul {

// Index of the nearest-rank q-percentile among n > 0 sorted values.
size_t NearestRankIndex(size_t n, double q);

// The nearest-rank q-percentile of `sorted`; 0 when it is empty.
double NearestRankPercentile(std::span<const double> sorted, double q);

// The interpolated q-percentile of `sorted`; 0 when it is empty.
double InterpolatedPercentile(std::span<const double> sorted, double q);

}  // namespace longhaul
