#include "tuner/estimate/loss_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace longhaul::tuner {

void LossCounter::Add(bool lost) {
  const int x = lost ? 1 : 0;
  ++c_.packets;
  if (x) {
    ++c_.lost;
    if (prev_ != 1) ++c_.bursts;
  }
  if (prev_ >= 0) {
    if (prev_ == 0) {
      ++c_.n0x;
      if (x) ++c_.n01;
    } else {
      ++c_.n1x;
      if (x) ++c_.n11;
    }
  }
  if (prev2_ >= 0) {
    ++c_.triples;
    if (prev2_ == 1 && x == 1) {
      ++c_.n1x1;
      if (prev_ == 1) ++c_.n111;
    }
  }
  prev2_ = prev_;
  prev_ = x;
}

LossCounts CountLosses(std::span<const uint8_t> lost) {
  LossCounter counter;
  for (uint8_t x : lost) counter.Add(x != 0);
  return counter.counts();
}

double GilbertFit::loss_rate() const {
  if (p + r <= 0) return 0.0;
  return p / (p + r) * (1.0 - h);
}

GilbertFit FitGilbert2(const LossCounts& c) {
  GilbertFit f;
  if (c.lost == 0) return f;  // p = 0, r = 1
  if (c.n0x > 0) f.p = static_cast<double>(c.n01) / static_cast<double>(c.n0x);
  else f.p = 1.0;  // never saw a received packet followed by anything
  if (c.n1x > 0) {
    f.r = static_cast<double>(c.n1x - c.n11) / static_cast<double>(c.n1x);
  } else {
    f.r = 1.0;  // the only loss was the last packet: no evidence of a longer run
  }
  if (f.r <= 0) f.r = 1.0 / static_cast<double>(c.lost);  // all losses in one run to the end
  return f;
}

GilbertFit FitGilbert3(const LossCounts& c) {
  GilbertFit two = FitGilbert2(c);
  auto fallback = [&](const char* why) {
    GilbertFit f = two;
    f.note = why;
    return f;
  };
  if (c.lost == 0) return fallback("no loss");
  if (c.n1x == 0 || c.triples == 0 || c.packets < 3) return fallback("too few observations");
  if (c.n1x1 == 0) return fallback("no loss pairs two apart (101 or 111)");
  const double a = c.loss_rate();
  const double b = static_cast<double>(c.n11) / static_cast<double>(c.n1x);
  const double cc = static_cast<double>(c.n111) / static_cast<double>(c.n1x1);
  const double den = 2 * a * cc - b * (a + cc);
  if (std::abs(den) < 1e-15) return fallback("degenerate moments");
  const double one_minus_r = (a * cc - b * b) / den;
  if (!(one_minus_r >= 0 && one_minus_r < 1)) return fallback("fitted r outside (0, 1]");
  const double r = 1 - one_minus_r;
  if (one_minus_r <= 0) return fallback("fitted r = 1 (memoryless)");
  const double h = 1 - b / one_minus_r;
  if (!(h >= 0 && h < 1)) return fallback("fitted h outside [0, 1)");
  const double den2 = 1 - h - a;
  if (!(den2 > 0)) return fallback("fitted p undefined");
  const double p = a * r / den2;
  if (!(p >= 0 && p <= 1)) return fallback("fitted p outside [0, 1]");
  GilbertFit f;
  f.p = p;
  f.r = r;
  f.h = h;
  f.three_parameter = true;
  return f;
}

double BurstRatio(const LossCounts& c) {
  if (c.lost == 0 || c.bursts == 0) return 0.0;
  const double loss = c.loss_rate();
  if (loss >= 1.0) return std::numeric_limits<double>::infinity();
  return c.mean_burst() * (1.0 - loss);
}

LossEstimate EstimateLoss(const LossCounts& c) {
  LossEstimate e;
  e.packets = c.packets;
  e.lost = c.lost;
  e.bursts = c.bursts;
  e.loss_rate = c.loss_rate();
  e.mean_burst = c.lost ? c.mean_burst() : 1.0;
  e.burst_ratio = BurstRatio(c);
  e.loss_rate_rel_error = c.bursts ? 2.0 / std::sqrt(static_cast<double>(c.bursts))
                                   : std::numeric_limits<double>::infinity();
  if (c.lost == 0 && c.packets > 0) e.loss_rate_upper_if_none = 3.0 / static_cast<double>(c.packets);
  e.gilbert2 = FitGilbert2(c);
  e.gilbert3 = FitGilbert3(c);
  return e;
}

std::string LossEstimate::ToString() const {
  if (lost == 0) {
    return absl::StrFormat("no loss in %d packets (loss < %.2g at 95%%)", packets,
                           loss_rate_upper_if_none);
  }
  return absl::StrFormat(
      "loss %.3g (+-%.0f%%) in %d packets, %d bursts, mean burst %.2f, burst ratio %.2f; "
      "gilbert p=%.3g r=%.3g%s",
      loss_rate, 100 * std::min(loss_rate_rel_error, 9.99), packets, bursts, mean_burst,
      burst_ratio, gilbert2.p, gilbert2.r,
      gilbert3.three_parameter
          ? absl::StrFormat("; 3-param p=%.3g r=%.3g h=%.3g", gilbert3.p, gilbert3.r, gilbert3.h)
          : std::string());
}

}  // namespace longhaul::tuner
