#include "transport/fec/fec_policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "transport/fec/cauchy_code.h"
#include "transport/fec/loss_model.h"

namespace longhaul::fec {
namespace {

// The policy's target is a quarter of the tail's share of messages (fec_tail): a code
// leaving up to this many times the target still spares the tail most repairs.
constexpr double kTailMargin = 4.0;

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

// The least-overhead (k, m, D) meeting the target within max_overhead, and the most
// protective one there.
struct Search {
  bool have_feasible = false;
  Candidate best;
  bool have_any = false;
  Candidate most_protective;
  uint32_t evaluated = 0;
};

Search SearchCodes(const FecPolicyInput& in, const GilbertModel& link, uint64_t n,
                   double max_overhead) {
  const uint32_t max_k = std::clamp<uint32_t>(in.max_k, 1, kMaxShards - 1);
  const uint32_t min_k = std::clamp<uint32_t>(in.min_k, 1, max_k);
  std::vector<uint32_t> ks;
  ks.push_back(min_k);
  for (uint32_t k : kLadder) {
    if (k > min_k && k < max_k) ks.push_back(k);
  }
  if (max_k != min_k) ks.push_back(max_k);
  const uint32_t max_depth = std::max<uint32_t>(in.max_interleave, 1);

  Search r;

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
        if (c.overhead > max_overhead) break;  // grows with m
        c.block_failure = !full.empty() ? full[m] : (!hi.empty() ? hi[m] : 0.0);
        c.repairs = static_cast<double>(layout.full_blocks) * (full.empty() ? 0.0 : full[m]) +
                    static_cast<double>(layout.hi_count) * (hi.empty() ? 0.0 : hi[m]) +
                    static_cast<double>(layout.lo_count) * (lo.empty() ? 0.0 : lo[m]);
        ++r.evaluated;
        if (!r.have_any || c.repairs < r.most_protective.repairs ||
            (c.repairs == r.most_protective.repairs &&
             c.overhead < r.most_protective.overhead)) {
          r.most_protective = c;
          r.have_any = true;
        }
        if (c.repairs <= in.target_repairs_per_message) {
          if (!r.have_feasible || Better(c, r.best)) r.best = c;
          r.have_feasible = true;
          break;  // more parity only adds overhead for this (k, D)
        }
      }
    }
    if (depth > max_depth / 2) break;  // avoid overflow of depth *= 2
  }

  return r;
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
  // Retransmission as the repair. Without FEC only a loss among a message's last
  // exposed_packets delays it (earlier ones are resent while the message is still being
  // sent). A resend is lost with probability p: the tail sees `rounds` rounds, enough
  // that a message needing more is rarer than the target (capped: at that many, FEC).
  const uint64_t exposed =
      in.exposed_packets > 0 && in.exposed_packets < static_cast<double>(n)
          ? std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(in.exposed_packets)))
          : n;
  const double costly = exposed < n ? ProbAnyLoss(link, exposed) : d.repairs_without_fec;
  int rounds = 1;
  for (double more = costly * p; more > in.target_repairs_per_message && rounds < 4; more *= p) {
    ++rounds;
  }
  if (in.repair_cost > 0 && costly <= in.target_repairs_per_message) {
    d.reason = FecPolicyReason::kNotNeeded;  // the losses that cost anything are rare enough
    return d;
  }
  // Repairs cheap against the message's own time (a tenth of margin on each bound): a
  // repaired message stays within the tail; off if what repairs add to the mean is small,
  // or (below) no more than the parity would add to every message.
  const bool cheap_repairs =
      in.repair_cost > 0 && rounds * in.repair_cost <= 0.9 * in.tail_slack;
  const double repair_mean_cost =
      costly * in.repair_cost * (1 + std::max(0.0, in.messages_behind));
  if (cheap_repairs && repair_mean_cost <= 0.9 * in.mean_slack) {
    d.reason = FecPolicyReason::kNotNeeded;
    return d;
  }
  // Parity lengthens every message by overhead x serialisation share: more than the tail
  // allows fails every message to spare some a repair.
  double max_overhead = in.max_overhead;
  if (in.serialisation_share > 0) {
    max_overhead = std::min(max_overhead, 0.9 * in.tail_slack / in.serialisation_share);
  }

  Search found = SearchCodes(in, link, n, max_overhead);
  d.candidates_evaluated = found.evaluated;
  // Where even the most protective code within that cap leaves a repair for more than
  // the tail's share of messages (4 x the target), the repair rounds cost the tail more
  // than longer messages do: search up to max_overhead. Only the blocks near the
  // message's end count: a lost block is resent once its span has passed (the loss
  // detector waits for its parity), and before the exposed packets that is in time.
  auto tail_repairs = [&](const Candidate& c) {
    const double span = static_cast<double>(c.depth) * (c.k + c.m);
    return c.repairs * std::min(1.0, (static_cast<double>(exposed) + span) / n);
  };
  if (max_overhead < in.max_overhead && !in.loss_is_bound && !found.have_feasible &&
      (!found.have_any ||
       tail_repairs(found.most_protective) > kTailMargin * in.target_repairs_per_message)) {
    found = SearchCodes(in, link, n, in.max_overhead);
    d.candidates_evaluated += found.evaluated;
  }
  const bool have_feasible = found.have_feasible;
  if (!found.have_any) {
    // No geometry fits the limits (a window smaller than one block, or even m = 1 costs
    // more than max_overhead): stay off.
    d.reason = FecPolicyReason::kOverLimits;
    return d;
  }
  const Candidate& c = have_feasible ? found.best : found.most_protective;
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
