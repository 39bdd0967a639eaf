#include "tuner/estimate/rtt_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "transport/base/percentile.h"

namespace longhaul::tuner {
std::string RttSummary::ToString() const {
  return absl::StrFormat("min %.3fms p50 %.3fms p99 %.3fms max %.3fms jitter %.3fms (n=%d)",
                         min.milliseconds(), p50.milliseconds(), p99.milliseconds(),
                         max.milliseconds(), jitter.milliseconds(), count);
}

absl::StatusOr<Duration> RttPercentile(std::span<const Duration> samples, double q) {
  if (samples.empty()) return absl::InvalidArgumentError("no RTT samples");
  std::vector<Duration> v(samples.begin(), samples.end());
  const size_t i = NearestRankIndex(v.size(), q);
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

absl::StatusOr<RttSummary> SummarizeRtt(std::span<const Duration> samples) {
  if (samples.empty()) return absl::InvalidArgumentError("no RTT samples");
  std::vector<Duration> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  if (v.front() < Duration::Zero()) return absl::InvalidArgumentError("negative RTT sample");
  RttSummary s;
  s.count = v.size();
  s.min = v.front();
  s.max = v.back();
  s.p50 = v[NearestRankIndex(v.size(), 0.50)];
  s.p90 = v[NearestRankIndex(v.size(), 0.90)];
  s.p99 = v[NearestRankIndex(v.size(), 0.99)];
  // Sums in double seconds: n x 150 ms cannot overflow, and ns precision is kept to
  // well below the sampling noise.
  double sum = 0;
  for (Duration d : v) sum += static_cast<double>(d.ns());
  const double mean = sum / static_cast<double>(v.size());
  double dev = 0;
  for (Duration d : v) dev += std::abs(static_cast<double>(d.ns()) - mean);
  s.mean = Duration::Nanoseconds(static_cast<int64_t>(std::llround(mean)));
  s.mean_deviation =
      Duration::Nanoseconds(static_cast<int64_t>(std::llround(dev / static_cast<double>(v.size()))));
  s.jitter = s.p99 - s.p50;
  return s;
}

}  // namespace longhaul::tuner
