#include "transport/core/fec/fec_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "transport/core/fec/cauchy_code.h"
#include "transport/core/fec/loss_model.h"

namespace longhaul::fec {
namespace {

// Block sizes worth considering; min_k and max_k are added to the ladder.
constexpr std::array<uint32_t, 21> kLadder = {4,  6,  8,  12, 16,  20,  24,  28,  32,  40, 48,
                                              56, 64, 80, 96, 112, 128, 160, 192, 224, 254};

// How a message of N packets splits into blocks for (k, D).
struct Layout {
  uint64_t full_blocks = 0;  // k data shards each
  uint32_t hi_size = 0;      // shortened blocks of the last, partial group
  uint64_t hi_count = 0;
  uint32_t lo_size = 0;
  uint64_t lo_count = 0;
  uint64_t blocks() const { return full_blocks + hi_count + lo_count; }
};

Layout MessageLayout(uint64_t n, uint32_t k, uint32_t depth) {
  Layout l;
  const uint64_t group = static_cast<uint64_t>(k) * depth;
  l.full_blocks = (n / group) * depth;
  const uint64_t rest = n % group;
  if (rest == 0) return l;
  // Round-robin: the first rest % D blocks get one shard more.
  const uint64_t base = rest / depth;
  const uint64_t extra = rest % depth;
  l.hi_size = static_cast<uint32_t>(base + 1);
  l.hi_count = extra;
  l.lo_size = static_cast<uint32_t>(base);
  l.lo_count = base > 0 ? depth - extra : 0;
  return l;
}

struct Candidate {
  uint32_t k = 0, m = 0, depth = 1;
  uint64_t blocks = 0;
  double overhead = 0.0;
  double block_failure = 0.0;
  double repairs = 0.0;
};

// Strict weak order "a is a better feasible choice than b".
bool Better(const Candidate& a, const Candidate& b) {
  const double tol = 1e-12 * std::max(a.overhead, b.overhead);
  if (a.overhead < b.overhead - tol) return true;
  if (a.overhead > b.overhead + tol) return false;
  if (a.depth != b.depth) return a.depth < b.depth;
  if (a.repairs != b.repairs) return a.repairs < b.repairs;
  return a.k > b.k;
}

}  // namespace

const char* FecPolicyReasonName(FecPolicyReason reason) {
  switch (reason) {
    case FecPolicyReason::kCleanLink:
      return "clean-link";
    case FecPolicyReason::kNotNeeded:
      return "not-needed";
    case FecPolicyReason::kMeetsTarget:
      return "meets-target";
    case FecPolicyReason::kBestEffort:
      return "best-effort";
    case FecPolicyReason::kOverLimits:
      return "over-limits";
  }
  return "?";
}

FecPolicyDecision ChooseFecParameters(const FecPolicyInput& in) {
  FecPolicyDecision d;
  uint64_t n = in.packets_per_message;
  if (n == 0) n = in.window_packets;
  if (n == 0) n = FecPolicyInput::kDefaultMessagePackets;
  d.message_packets = n;

  const GilbertModel link = GilbertModel::FromLossAndBurst(in.loss_rate, in.mean_burst);
  const double p = link.loss_rate();
  d.repairs_without_fec = ProbAnyLoss(link, n);
  d.repairs_per_message = d.repairs_without_fec;
  if (!(p >= in.loss_floor) || p <= 0.0) {
    d.reason = FecPolicyReason::kCleanLink;
    return d;
  }
  if (d.repairs_without_fec <= in.target_repairs_per_message) {
    d.reason = FecPolicyReason::kNotNeeded;
    return d;
  }
  // Repairs cheap against the message's own time (a tenth of margin on each bound): a
  // repaired message stays within the tail; off if what repairs add to the mean is small,
  // or (below) no more than the parity would add to every message.
  const bool cheap_repairs = in.repair_cost > 0 && in.repair_cost <= 0.9 * in.tail_slack;
  const double repair_mean_cost =
      d.repairs_without_fec * in.repair_cost * (1 + std::max(0.0, in.messages_behind));
  if (cheap_repairs && repair_mean_cost <= 0.9 * in.mean_slack) {
    d.reason = FecPolicyReason::kNotNeeded;
    return d;
  }

  const uint32_t max_k = std::clamp<uint32_t>(in.max_k, 1, kMaxShards - 1);
  const uint32_t min_k = std::clamp<uint32_t>(in.min_k, 1, max_k);
  std::vector<uint32_t> ks;
  ks.push_back(min_k);
  for (uint32_t k : kLadder) {
    if (k > min_k && k < max_k) ks.push_back(k);
  }
  if (max_k != min_k) ks.push_back(max_k);
  const uint32_t max_depth = std::max<uint32_t>(in.max_interleave, 1);

  bool have_feasible = false;
  Candidate best;
  bool have_any = false;
  Candidate most_protective;

  for (uint32_t depth = 1; depth <= max_depth; depth *= 2) {
    const GilbertModel seen = link.Subsampled(depth);
    for (uint32_t k : ks) {
      const int max_m = static_cast<int>(std::min<uint32_t>(in.max_m, kMaxShards - k));
      if (max_m < 1) continue;
      if (in.window_packets != 0 && static_cast<uint64_t>(depth) * (k + 1) > in.window_packets) {
        continue;
      }
      const Layout layout = MessageLayout(n, k, depth);
      std::vector<double> full, hi, lo;
      if (layout.full_blocks > 0) full = BlockFailureByParity(seen, static_cast<int>(k), max_m);
      if (layout.hi_count > 0)
        hi = BlockFailureByParity(seen, static_cast<int>(layout.hi_size), max_m);
      if (layout.lo_count > 0)
        lo = BlockFailureByParity(seen, static_cast<int>(layout.lo_size), max_m);

      for (int m = 1; m <= max_m; ++m) {
        if (in.window_packets != 0 &&
            static_cast<uint64_t>(depth) * (k + static_cast<uint32_t>(m)) > in.window_packets) {
          break;
        }
        Candidate c;
        c.k = k;
        c.m = static_cast<uint32_t>(m);
        c.depth = depth;
        c.blocks = layout.blocks();
        c.overhead =
            static_cast<double>(m) * static_cast<double>(c.blocks) / static_cast<double>(n);
        if (c.overhead > in.max_overhead) break;  // grows with m
        c.block_failure = !full.empty() ? full[m] : (!hi.empty() ? hi[m] : 0.0);
        c.repairs = static_cast<double>(layout.full_blocks) * (full.empty() ? 0.0 : full[m]) +
                    static_cast<double>(layout.hi_count) * (hi.empty() ? 0.0 : hi[m]) +
                    static_cast<double>(layout.lo_count) * (lo.empty() ? 0.0 : lo[m]);
        ++d.candidates_evaluated;
        if (!have_any || c.repairs < most_protective.repairs ||
            (c.repairs == most_protective.repairs && c.overhead < most_protective.overhead)) {
          most_protective = c;
          have_any = true;
        }
        if (c.repairs <= in.target_repairs_per_message) {
          if (!have_feasible || Better(c, best)) best = c;
          have_feasible = true;
          break;  // more parity only adds overhead for this (k, D)
        }
      }
    }
    if (depth > max_depth / 2) break;  // avoid overflow of depth *= 2
  }

  if (!have_any) {
    // No geometry fits the limits (a window smaller than one block, or even m = 1 costs
    // more than max_overhead): stay off.
    d.reason = FecPolicyReason::kOverLimits;
    return d;
  }
  const Candidate& c = have_feasible ? best : most_protective;
  // Parity costs every message its overhead (at most: the serialisation's share of the
  // message time is <= 1); repairs that cost the mean less, and keep the tail, win.
  if (cheap_repairs && repair_mean_cost <= c.overhead) {
    d.reason = FecPolicyReason::kNotNeeded;
    return d;
  }
  d.enabled = true;
  d.k = c.k;
  d.m = c.m;
  d.interleave = c.depth;
  d.reason = have_feasible ? FecPolicyReason::kMeetsTarget : FecPolicyReason::kBestEffort;
  d.blocks_per_message = c.blocks;
  d.overhead = c.overhead;
  d.block_failure = c.block_failure;
  d.repairs_per_message = c.repairs;
  return d;
}

}  // namespace longhaul::fec
