#include "transport/base/percentile.h"

#include <algorithm>
#include <cmath>

namespace longhaul {

size_t NearestRankIndex(size_t n, double q) {
  q = std::clamp(q, 0.0, 1.0);
  const double rank = std::ceil(q * static_cast<double>(n));
  return rank <= 1 ? 0 : std::min(n - 1, static_cast<size_t>(rank) - 1);
}

double NearestRankPercentile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[NearestRankIndex(sorted.size(), q)];
}

double InterpolatedPercentile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return sorted[lo] * (1 - f) + sorted[hi] * f;
}

}  // namespace longhaul
