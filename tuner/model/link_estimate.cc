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
  s.rate = rate;
  s.rtt = rtt;
  const Duration spread = rtt_p99 > rtt ? rtt_p99 - rtt : Duration::Zero();
  s.jitter = spread.Scaled(1.0 / kJitterP99);
  s.loss = std::clamp(loss, 0.0, 0.5);
  // The link model needs loss <= burst / (burst + 1) for a Gilbert chain.
  s.burst = mean_burst > 1.0 ? mean_burst : 1.0;
  s.reorder = std::clamp(reorder, 0.0, 1.0);
  if (s.reorder > 0 && reorder_late > Duration::Zero()) s.reorder_delay = reorder_late;
  s.mtu = std::clamp<ByteCount>(mtu, 68, 65535);
  s.overhead = overhead;
  if (queue_bytes > 0) s.queue = sim::QueueSize::Bytes(queue_bytes);
  s.seed = seed;
  return s;
}

std::string LinkEstimate::ToString() const {
  std::string s = absl::StrFormat(
      "rate=%s rtt=%s (p50 %s, p99 %s) loss=%.3g burst=%.2f mtu=%d", FormatBandwidth(rate),
      FormatDuration(rtt), FormatDuration(rtt_p50), FormatDuration(rtt_p99), loss, mean_burst,
      mtu);
  if (reorder > 0) {
    absl::StrAppendFormat(&s, " reorder=%.3g late=%s", reorder, FormatDuration(reorder_late));
  }
  return s;
}

}  // namespace longhaul::tuner
