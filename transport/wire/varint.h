// Variable-length integers in the QUIC encoding (RFC 9000 section 16): the two most
// significant bits of the first byte give the length (1, 2, 4 or 8 bytes), the rest is
// the value in network byte order. Values up to 2^62 - 1.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::wire {

inline constexpr uint64_t kMaxVarint = (1ULL << 62) - 1;

inline constexpr size_t VarintSize(uint64_t v) {
  return v < (1ULL << 6) ? 1 : v < (1ULL << 14) ? 2 : v < (1ULL << 30) ? 4 : 8;
}

// Writes v (<= kMaxVarint) at p, which must have VarintSize(v) bytes. Returns bytes written.
inline size_t WriteVarint(uint8_t* p, uint64_t v) {
  switch (VarintSize(v)) {
    case 1:
      p[0] = static_cast<uint8_t>(v);
      return 1;
    case 2:
      p[0] = static_cast<uint8_t>(0x40 | (v >> 8));
      p[1] = static_cast<uint8_t>(v);
      return 2;
    case 4:
      p[0] = static_cast<uint8_t>(0x80 | (v >> 24));
      p[1] = static_cast<uint8_t>(v >> 16);
      p[2] = static_cast<uint8_t>(v >> 8);
      p[3] = static_cast<uint8_t>(v);
      return 4;
    default:
      p[0] = static_cast<uint8_t>(0xC0 | (v >> 56));
      for (int i = 1; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * (7 - i)));
      return 8;
  }
}

// Reads a varint from [p, end). Returns bytes consumed, or 0 if the input is truncated.
inline size_t ReadVarint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  if (p >= end) return 0;
  size_t len = size_t{1} << (p[0] >> 6);
  if (static_cast<size_t>(end - p) < len) return 0;
  uint64_t x = p[0] & 0x3F;
  for (size_t i = 1; i < len; ++i) x = (x << 8) | p[i];
  *v = x;
  return len;
}

}  // namespace longhaul::wire
