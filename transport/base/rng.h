// Deterministic pseudo-random generator (xoshiro256**, seeded through splitmix64).
//
// Every component that needs randomness takes an Rng (or a seed) from its owner, so the
// same seed gives the same run: the simulator and the tests depend on this. Not
// thread-safe; give each thread or component its own instance (see Fork()).
#pragma once

#include <cstdint>

namespace longhaul {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { Seed(seed); }

  void Seed(uint64_t seed) {
    uint64_t s = seed;
    for (auto& w : s_) w = SplitMix64(s);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n); n > 0.
  uint64_t UniformInt(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  bool Bernoulli(double p) { return p > 0 && Uniform() < p; }

  // An independent generator derived from this one (for sub-components).
  Rng Fork() { return Rng(Next()); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace longhaul
