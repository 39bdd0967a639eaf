// Payload helpers for tests: deterministic pseudo-random bytes, and their
// entropy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace longhaul::testing {

using Bytes = std::vector<uint8_t>;

// `n` bytes drawn from Rng(seed): the same (n, seed) gives the same bytes,
// other seeds give other bytes.
Bytes Pattern(size_t n, uint64_t seed);

// Writes Pattern(n, seed) into out[0..n).
void FillPattern(uint8_t *out, size_t n, uint64_t seed);

// Does data[0..n) equal Pattern(n, seed)?
bool CheckPattern(const uint8_t *data, size_t n, uint64_t seed);

// Shannon entropy of the byte distribution, in bits per byte (8 for uniform
// bytes).
double Entropy(const Bytes &bytes);

} // namespace longhaul::testing
