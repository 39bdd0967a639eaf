#include "tests/support/pattern.h"

#include <cmath>
#include <cstring>

#include "transport/base/rng.h"

namespace longhaul::testing {

void FillPattern(uint8_t *out, size_t n, uint64_t seed) {
  Rng r(seed);
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<uint8_t>(r.Next());
}

Bytes Pattern(size_t n, uint64_t seed) {
  Bytes v(n);
  FillPattern(v.data(), n, seed);
  return v;
}

bool CheckPattern(const uint8_t *data, size_t n, uint64_t seed) {
  const Bytes want = Pattern(n, seed);
  return n == 0 || std::memcmp(data, want.data(), n) == 0;
}

double Entropy(const Bytes &bytes) {
  std::vector<double> count(256, 0);
  for (uint8_t b : bytes)
    count[b] += 1;
  double h = 0;
  for (double c : count) {
    if (c > 0)
      h -= c / bytes.size() * std::log2(c / bytes.size());
  }
  return h;
}

} // namespace longhaul::testing
