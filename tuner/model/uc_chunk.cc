#include "tuner/model/uc_chunk.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace longhaul::tuner {

double UcChunkLoss(double loss, double burst, uint32_t packets) {
  const double b = std::max(1.0, burst);
  const double start = std::clamp(loss / b, 0.0, 1.0);
  return 1.0 - std::pow(1.0 - start, static_cast<double>(packets) + b - 1.0);
}

UcChunkAdvice AdviseUcChunk(const LinkEstimate& link, double budget) {
  UcChunkAdvice a;
  a.budget = budget;
  for (uint32_t k = 1; k <= kMaxUcChunkPackets; k *= 2) {
    if (k > 1 && UcChunkLoss(link.loss, link.mean_burst, k) > budget) break;
    a.packets = k;
  }
  a.chunk_loss = UcChunkLoss(link.loss, link.mean_burst, a.packets);
  a.why = absl::StrFormat("%u packet%s: chunk loss %.2f %% at loss %.0e, burst %.3g (budget %.3g %%)",
                          a.packets, a.packets == 1 ? "" : "s", 100 * a.chunk_loss, link.loss,
                          std::max(1.0, link.mean_burst), 100 * budget);
  return a;
}

}  // namespace longhaul::tuner
