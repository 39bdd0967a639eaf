#include "tuner/model/link_estimate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "transport/base/parse.h"

namespace longhaul::tuner {
namespace {

// p99 of the sum of two independent uniforms on [0, 1]: 2 - sqrt(2 x 0.01).
constexpr double kJitterP99 = 2.0 - 0.14142135623730950;

double RoundSignificant(double v, int digits) {
  if (!(v > 0) || !std::isfinite(v)) return v;
  const int e = digits - 1 - static_cast<int>(std::floor(std::log10(v)));
  // Multiply or divide by an exact power of ten so 1e8 stays 1e8.
  const double p = std::pow(10.0, std::abs(e));
  return e >= 0 ? std::round(v * p) / p : std::round(v / p) * p;
}

Duration RoundToMicroseconds(Duration d) {
  return Duration::Microseconds((d.ns() + 500) / 1000);
}

std::string Rate(Bandwidth b) {
  const double v = b.bps();
  if (v >= 1e9) return absl::StrFormat("%.4ggbit", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.4gmbit", v / 1e6);
  return absl::StrFormat("%.4gkbit", v / 1e3);
}

std::string Ms(Duration d) { return absl::StrFormat("%.3fms", d.milliseconds()); }

}  // namespace

ByteCount LinkEstimate::QueueBytes() const {
  if (queue_bytes > 0) return queue_bytes;
  return std::max<ByteCount>(BdpBytes(), sim::LinkSpec::kMinQueue);
}

LinkEstimate LinkEstimate::FromLinkSpec(const sim::LinkSpec& spec) {
  LinkEstimate e;
  e.rate = spec.rate;
  e.rtt = spec.rtt;
  e.rtt_p50 = spec.rtt + spec.jitter;
  e.rtt_p99 = spec.rtt + spec.jitter.Scaled(kJitterP99);
  e.loss = spec.loss;
  e.mean_burst = std::max(1.0, spec.burst);
  e.reorder = spec.reorder;
  e.reorder_late = spec.reorder > 0 ? spec.reorder_delay : Duration::Zero();
  e.mtu = spec.mtu;
  e.overhead = spec.overhead;
  e.queue_bytes = spec.QueueLimitBytes();
  e.source = absl::StrCat("link ", spec.ToString());
  return e;
}

sim::LinkSpec LinkEstimate::ToLinkSpec(uint64_t seed) const {
  sim::LinkSpec s;
  // Measured values carry more digits than they are worth: 4 significant digits for the
  // rate, microseconds for times, 3 significant digits for probabilities.
  s.rate = Bandwidth::BitsPerSecond(RoundSignificant(rate.bps(), 4));
  s.rtt = RoundToMicroseconds(rtt);
  const Duration spread = rtt_p99 > rtt ? rtt_p99 - rtt : Duration::Zero();
  s.jitter = RoundToMicroseconds(spread.Scaled(1.0 / kJitterP99));
  s.loss = RoundSignificant(std::clamp(loss, 0.0, 0.5), 3);
  s.burst = mean_burst > 1.0 ? RoundSignificant(mean_burst, 3) : 1.0;
  // The link model needs loss <= burst / (burst + 1) for a Gilbert chain.
  if (s.burst > 1.0) s.loss = std::min(s.loss, s.burst / (s.burst + 1));
  s.reorder = RoundSignificant(std::clamp(reorder, 0.0, 1.0), 3);
  if (s.reorder > 0 && reorder_late > Duration::Zero()) {
    s.reorder_delay = std::max(RoundToMicroseconds(reorder_late), Duration::Microseconds(1));
  }
  s.mtu = std::clamp<ByteCount>(mtu, 68, 65535);
  s.overhead = overhead;
  if (queue_bytes > 0) s.queue = sim::QueueSize::Bytes(queue_bytes);
  s.seed = seed;
  return s;
}

std::string LinkEstimate::ToString() const {
  std::string s = absl::StrFormat("rate=%s rtt=%s (p50 %s, p99 %s) loss=%.3g burst=%.3g mtu=%d",
                                  Rate(rate), Ms(rtt), Ms(rtt_p50), Ms(rtt_p99), loss, mean_burst,
                                  mtu);
  if (reorder > 0) {
    absl::StrAppendFormat(&s, " reorder=%.3g late=%s", reorder, Ms(reorder_late));
  }
  return s;
}

}  // namespace longhaul::tuner
