// Packet-loss model for FEC sizing: the two-state Gilbert chain (a Gilbert-Elliott model
// that loses every packet in Bad and none in Good), fitted from a loss rate and a mean
// burst length, and the distribution of the number of losses in a block.
//
//   Good -> Bad with probability q per packet, Bad -> Good with probability r.
//   loss rate p = q / (q + r), mean loss-run length = 1 / r.
//   Bernoulli loss is the special case q + r = 1 (r = 1 - p, mean run 1 / (1 - p)).
//
// Interleaving: a block whose shards are D packets apart sees the chain every D steps.
// With lambda = 1 - q - r (the second eigenvalue), the D-step chain is again a Gilbert
// chain with q_D = p (1 - lambda^D) and r_D = (1 - p)(1 - lambda^D): same loss rate,
// bursts shortened, approaching Bernoulli as lambda^D -> 0.
//
// Loss counts: a forward recursion over the block's packets on (state, losses so far),
// with losses beyond the cap in an absorbing bucket, so tail probabilities are sums of
// positive terms (accurate down to 1e-300, no 1 - (1 - x) cancellation).
//
// Pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace longhaul::fec {

struct GilbertModel {
  double q = 0.0;  // P(Good -> Bad) per step
  double r = 1.0;  // P(Bad -> Good) per step

  // Fits p (clamped to [0, 0.5]) and mean burst b (>= 1; raised if p and b are
  // incompatible, i.e. q would exceed 1).
  static GilbertModel FromLossAndBurst(double loss_rate, double mean_burst);
  // Bernoulli loss with probability p.
  static GilbertModel Bernoulli(double loss_rate);

  double loss_rate() const { return q + r > 0 ? q / (q + r) : 0.0; }
  double mean_burst() const { return r > 0 ? 1.0 / r : 0.0; }
  // The chain observed every `spacing` steps (spacing >= 1).
  GilbertModel Subsampled(uint32_t spacing) const;
};

// P(exactly j losses among n consecutive observations), j = 0..max_count, followed by
// P(more than max_count losses) as the last element (size max_count + 2). The chain
// starts in its stationary distribution.
std::vector<double> LossCountDistribution(const GilbertModel& model, int n, int max_count);

// P(more than `m` losses among n consecutive observations).
double ProbMoreThan(const GilbertModel& model, int n, int m);

// tail[m] = P(more than m losses among (base_n + m) observations) for m = 0..max_m, in
// one pass: the failure probability of a block of base_n data shards and m parity
// shards for every m at once.
std::vector<double> BlockFailureByParity(const GilbertModel& model, int base_n, int max_m);

// P(at least one loss among n consecutive observations).
double ProbAnyLoss(const GilbertModel& model, uint64_t n);

}  // namespace longhaul::fec
