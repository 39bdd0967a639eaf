// The chunk size of the verbs datapath's UC mode (docs/rdma.md section 7.7): one RDMA
// WRITE carries a chunk of k MTU packets, and UC loses the whole write when any of its
// packets is lost, so the chunk's loss grows with k while the completions per byte fall
// with it. AdviseUcChunk picks the largest k (a power of two, at most kMaxUcChunkPackets)
// whose expected chunk loss stays within a budget of resent bytes, from the link's loss
// rate and mean burst length: a burst inside one chunk costs that chunk once, so bursty
// loss allows larger chunks than random loss at the same rate. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "tuner/model/link_estimate.h"

namespace longhaul::tuner {

// 16 packets at RoCE's MTU of 4096 is the core's largest datagram (kMaxSegment).
inline constexpr uint32_t kMaxUcChunkPackets = 16;
// Resent bytes the choice allows, as a fraction of those sent.
inline constexpr double kUcChunkLossBudget = 0.02;

struct UcChunkAdvice {
  uint32_t packets = 1;    // k
  double chunk_loss = 0;   // expected fraction of chunks lost at k
  double budget = kUcChunkLossBudget;
  // "16 packets: chunk loss 1.59 % at loss 1e-03, burst 1 (budget 2 %)"
  std::string why;
};

// Expected fraction of k-packet chunks a loss process of rate `loss` in bursts of mean
// length `burst` (>= 1) hits: 1 - (1 - loss / burst)^(k + burst - 1), the chance that a
// burst starts within the chunk or within the burst - 1 packets before it.
double UcChunkLoss(double loss, double burst, uint32_t packets);

UcChunkAdvice AdviseUcChunk(const LinkEstimate& link, double budget = kUcChunkLossBudget);

}  // namespace longhaul::tuner
