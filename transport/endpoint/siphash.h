// SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012): a keyed
// 64-bit pseudo-random function, used as the MAC of the handshake's stateless cookies.
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::endpoint {

struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

// SipHash-2-4 of `len` bytes at `data` under `key` (the key halves are the little-endian
// readings of the 16 key bytes, as in the paper's test vectors).
uint64_t SipHash24(const SipKey& key, const uint8_t* data, size_t len);

}  // namespace longhaul::endpoint
