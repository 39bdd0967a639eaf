// What the two examples share: the message pattern and a digest of what was carried.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace example {

// Message `i` of `size` bytes: a pattern that differs per message and per byte.
inline std::vector<uint8_t> MakeMessage(uint64_t i, size_t size) {
  std::vector<uint8_t> m(size);
  uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
  for (size_t k = 0; k < size; ++k) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    m[k] = static_cast<uint8_t>(x);
  }
  return m;
}

// FNV-1a over the messages in order.
class Digest {
 public:
  void Add(std::span<const uint8_t> bytes) {
    for (uint8_t b : bytes) {
      h_ ^= b;
      h_ *= 0x100000001b3ull;
    }
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace example
