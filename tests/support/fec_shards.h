// FEC helpers for tests: deterministic shard contents and erasure-pattern
// enumeration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "transport/base/rng.h"

namespace longhaul::testing {

// k shards of `len` bytes each, filled from `rng`.
std::vector<std::vector<uint8_t>> RandomShards(Rng &rng, int count, size_t len);

// Calls `fn(mask)` for every subset of {0..n-1} with at most `max_size`
// members, as a vector<bool> of size n (true = erased). Returns the number of
// subsets visited.
uint64_t
ForEachErasurePattern(int n, int max_size,
                      const std::function<void(const std::vector<bool> &)> &fn);

// A random subset of exactly `size` members of {0..n-1}.
std::vector<bool> RandomPattern(Rng &rng, int n, int size);

} // namespace longhaul::testing
