// Loss-rate and burstiness estimators over a per-packet loss trace (x_t = 1 if packet t,
// in send order, was lost): counts, the 2-parameter Gilbert fit, the 3-parameter
// Gilbert fit (Gilbert 1960), the burst ratio (McGowan 2005) and a summary with a rough
// confidence bound. Formulas: shared/reference/fec-and-tuning.md, B4.
//
// Conventions (Hasslinger/Hohlfeld, as in transport/fec/loss_model.h):
//   p = P(Good -> Bad) per packet, r = P(Bad -> Good),
//   h = P(packet received | Bad)   (0 in the 2-parameter model; Good never loses).
// The 2-parameter model is the link model's `burst` model (docs/simulator.md): loss
// rate p/(p+r), mean burst 1/r. fec::GilbertModel{q = p, r = r} is the same chain.
//
// Pure functions and a value-type accumulator; thread-safe as values are.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace longhaul::tuner {

// Sufficient statistics of a binary trace for the fits below.
struct LossCounts {
  uint64_t packets = 0;  // observations
  uint64_t lost = 0;
  uint64_t bursts = 0;   // maximal runs of consecutive losses
  uint64_t n0x = 0;      // consecutive pairs whose first packet was received
  uint64_t n01 = 0;      //   ... and the second lost
  uint64_t n1x = 0;      // pairs whose first packet was lost
  uint64_t n11 = 0;      //   ... and the second lost too
  uint64_t n1x1 = 0;     // triples with x_t = 1 and x_{t+2} = 1 (101 and 111)
  uint64_t n111 = 0;     // triples 111
  uint64_t triples = 0;  // consecutive triples

  double loss_rate() const { return packets ? static_cast<double>(lost) / packets : 0.0; }
  // Mean length of a loss run (lost / bursts); 0 with no loss.
  double mean_burst() const { return bursts ? static_cast<double>(lost) / bursts : 0.0; }
};

// Accumulates LossCounts one packet at a time, in send order.
class LossCounter {
 public:
  void Add(bool lost);
  const LossCounts& counts() const { return c_; }

 private:
  LossCounts c_;
  int prev_ = -1;   // x_{t-1}, -1 before the first packet
  int prev2_ = -1;  // x_{t-2}
};

// Counts of a whole trace; nonzero bytes are losses.
LossCounts CountLosses(std::span<const uint8_t> lost);

struct GilbertFit {
  double p = 0.0;  // Good -> Bad
  double r = 1.0;  // Bad -> Good
  double h = 0.0;  // receive probability in Bad
  bool three_parameter = false;  // false: the 2-parameter fit (also the 3-parameter fallback)
  std::string note;              // why a 3-parameter fit fell back, if it did

  // Stationary loss rate p/(p+r) (1-h); 0 for a loss-free trace.
  double loss_rate() const;
};

// p = n01 / n0x, r = n10 / n1x. A trace without loss gives p = 0, r = 1.
GilbertFit FitGilbert2(const LossCounts& c);

// Gilbert's method: a = P(1), b = P(1|1), c = P(111) / P(1x1);
//   1 - r = (a c - b^2) / (2 a c - b (a + c)),  h = 1 - b / (1 - r),  p = a r / (1 - h - a).
// Falls back to FitGilbert2 (three_parameter = false, `note` says why) when the moments
// are degenerate (no loss pairs, no triples) or the solution leaves [0, 1].
GilbertFit FitGilbert3(const LossCounts& c);

// Mean observed burst length divided by its value under Bernoulli loss at the same rate,
// 1 / (1 - loss). 1 for random loss, > 1 for bursty loss; 0 without loss.
double BurstRatio(const LossCounts& c);

// What the tuner reports about loss.
struct LossEstimate {
  uint64_t packets = 0;
  uint64_t lost = 0;
  uint64_t bursts = 0;
  double loss_rate = 0.0;
  double mean_burst = 1.0;   // observed mean run length (>= 1; 1 without loss)
  double burst_ratio = 0.0;
  // Rough 95 % relative half-width of loss_rate: loss events (bursts), not packets, are
  // the independent samples, so about 2 / sqrt(bursts) (reference B4); infinity with none.
  double loss_rate_rel_error = 0.0;
  // Upper 95 % bound on the loss rate when nothing was lost (rule of three), else 0.
  double loss_rate_upper_if_none = 0.0;
  GilbertFit gilbert2;
  GilbertFit gilbert3;

  std::string ToString() const;
};

LossEstimate EstimateLoss(const LossCounts& c);

}  // namespace longhaul::tuner
