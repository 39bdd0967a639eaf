#include "transport/fec/loss_model.h"

#include <algorithm>
#include <cmath>

namespace longhaul::fec {
namespace {

// One observation of the chain on (state, loss count) with count `cap` absorbing.
void Step(const GilbertModel& mdl, int cap, std::vector<double>& good, std::vector<double>& bad,
          std::vector<double>& next_good, std::vector<double>& next_bad) {
  std::fill(next_good.begin(), next_good.end(), 0.0);
  std::fill(next_bad.begin(), next_bad.end(), 0.0);
  for (int j = 0; j <= cap; ++j) {
    const double g = good[j];
    const double b = bad[j];
    if (g == 0.0 && b == 0.0) continue;
    next_good[j] += g * (1.0 - mdl.q) + b * mdl.r;                    // no loss
    next_bad[std::min(j + 1, cap)] += g * mdl.q + b * (1.0 - mdl.r);  // loss
  }
  good.swap(next_good);
  bad.swap(next_bad);
}

// State after the first observation, from the stationary distribution.
void Start(const GilbertModel& mdl, int cap, std::vector<double>& good, std::vector<double>& bad) {
  const double p = mdl.loss_rate();
  good.assign(cap + 1, 0.0);
  bad.assign(cap + 1, 0.0);
  good[0] = 1.0 - p;
  bad[std::min(1, cap)] = p;
}

}  // namespace

GilbertModel GilbertModel::FromLossAndBurst(double loss_rate, double mean_burst) {
  double p = std::isfinite(loss_rate) ? std::clamp(loss_rate, 0.0, 0.5) : 0.0;
  if (p == 0.0) return GilbertModel{0.0, 1.0};
  const double b = std::isfinite(mean_burst) ? std::max(mean_burst, 1.0) : 1.0;
  const double r = 1.0 / b;
  const double q = std::min(1.0, p * r / (1.0 - p));  // <= 1 whenever p <= 0.5
  return GilbertModel{q, r};
}

GilbertModel GilbertModel::Bernoulli(double loss_rate) {
  const double p = std::isfinite(loss_rate) ? std::clamp(loss_rate, 0.0, 1.0) : 0.0;
  return GilbertModel{p, 1.0 - p};
}

GilbertModel GilbertModel::Subsampled(uint32_t spacing) const {
  if (spacing <= 1 || q == 0.0) return *this;
  const double p = loss_rate();
  const double lambda_d = std::pow(1.0 - q - r, static_cast<double>(spacing));
  return GilbertModel{p * (1.0 - lambda_d), (1.0 - p) * (1.0 - lambda_d)};
}

std::vector<double> LossCountDistribution(const GilbertModel& model, int n, int max_count) {
  max_count = std::max(max_count, 0);
  const int cap = max_count + 1;
  std::vector<double> out(cap + 1, 0.0);
  if (n <= 0) {
    out[0] = 1.0;
    return out;
  }
  std::vector<double> good, bad, ng(cap + 1), nb(cap + 1);
  Start(model, cap, good, bad);
  for (int t = 1; t < n; ++t) Step(model, cap, good, bad, ng, nb);
  for (int j = 0; j <= cap; ++j) out[j] = good[j] + bad[j];
  return out;
}

double ProbMoreThan(const GilbertModel& model, int n, int m) {
  if (m < 0) return n > 0 ? 1.0 : 0.0;
  if (n <= m) return 0.0;
  return LossCountDistribution(model, n, m).back();
}

std::vector<double> BlockFailureByParity(const GilbertModel& model, int base_n, int max_m) {
  max_m = std::max(max_m, 0);
  std::vector<double> tail(max_m + 1, 0.0);
  const int cap = max_m + 1;
  const int total = base_n + max_m;
  if (total <= 0) return tail;
  std::vector<double> good, bad, ng(cap + 1), nb(cap + 1);
  Start(model, cap, good, bad);
  for (int n = 1; n <= total; ++n) {
    if (n > 1) Step(model, cap, good, bad, ng, nb);
    const int m = n - base_n;
    if (m < 0 || m > max_m) continue;
    double t = 0.0;
    for (int j = cap; j > m; --j) t += good[j] + bad[j];  // smallest terms first
    tail[m] = t;
  }
  return tail;
}

double ProbAnyLoss(const GilbertModel& model, uint64_t n) {
  if (n == 0) return 0.0;
  const double p = model.loss_rate();
  if (p <= 0.0) return 0.0;
  if (p >= 1.0 || model.q >= 1.0) return 1.0;
  const double log_clean = std::log1p(-p) + static_cast<double>(n - 1) * std::log1p(-model.q);
  return -std::expm1(log_clean);
}

}  // namespace longhaul::fec
