// longhaul-nccl-bench --recommend: the NCCL settings for a long-haul link, from a link
// spec or a tuned profile (its rate and RTT), printed as shell exports with a reason
// each. The rules (docs/nccl.md, "NCCL settings over long haul"): channels =
// clamp(ceil(rate / 10 Gbit/s), 2, 16); credit per comm = clamp(2 x BDP / channels,
// 16 MiB, 1 GiB); message size = the smallest power of two in [512 KiB, 8 MiB] that
// lasts 500 us at a channel's share of the rate; NCCL_BUFFSIZE = 8 messages.
#pragma once

#include <string>

namespace longhaul::nccl::bench {

// Prints the settings for `profile` (a profile file; wins when both are given) or `link`
// (a link spec) to stdout; returns 0, or 2 after one line on stderr naming the problem
// (neither given, a bad spec or profile, a profile without a rate).
int Recommend(const std::string& link, const std::string& profile);

}  // namespace longhaul::nccl::bench
