#include "tests/support/fec_shards.h"

#include <algorithm>
#include <numeric>

namespace longhaul::testing {

std::vector<std::vector<uint8_t>> RandomShards(Rng &rng, int count,
                                               size_t len) {
  std::vector<std::vector<uint8_t>> shards(count, std::vector<uint8_t>(len));
  for (auto &s : shards) {
    for (auto &b : s)
      b = static_cast<uint8_t>(rng.Next());
  }
  return shards;
}

namespace {
void Recurse(int n, int max_size, int next, int size, std::vector<bool> &mask,
             uint64_t &count,
             const std::function<void(const std::vector<bool> &)> &fn) {
  fn(mask);
  ++count;
  if (size == max_size)
    return;
  for (int i = next; i < n; ++i) {
    mask[i] = true;
    Recurse(n, max_size, i + 1, size + 1, mask, count, fn);
    mask[i] = false;
  }
}
} // namespace

uint64_t ForEachErasurePattern(
    int n, int max_size,
    const std::function<void(const std::vector<bool> &)> &fn) {
  std::vector<bool> mask(n, false);
  uint64_t count = 0;
  Recurse(n, max_size, 0, 0, mask, count, fn);
  return count;
}

std::vector<bool> RandomPattern(Rng &rng, int n, int size) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  for (int i = 0; i < size; ++i) {
    const int j = i + static_cast<int>(rng.UniformInt(n - i));
    std::swap(idx[i], idx[j]);
  }
  std::vector<bool> mask(n, false);
  for (int i = 0; i < size; ++i)
    mask[idx[i]] = true;
  return mask;
}

} // namespace longhaul::testing
