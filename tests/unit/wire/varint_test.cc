#include "transport/wire/varint.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul::wire {
namespace {

struct Boundary {
  uint64_t value;
  size_t size;
};

constexpr Boundary kBoundaries[] = {
    {0, 1},
    {1, 1},
    {63, 1},
    {64, 2},
    {(1ULL << 14) - 1, 2},
    {1ULL << 14, 4},
    {(1ULL << 30) - 1, 4},
    {1ULL << 30, 8},
    {1ULL << 40, 8},
    {kMaxVarint, 8},
};

TEST(VarintTest, SizeAtBoundaries) {
  for (const Boundary& b : kBoundaries) {
    EXPECT_EQ(VarintSize(b.value), b.size) << b.value;
  }
}

TEST(VarintTest, RoundTripAtBoundaries) {
  for (const Boundary& b : kBoundaries) {
    std::vector<uint8_t> buf(b.size);  // exactly sized: ASan catches overruns
    EXPECT_EQ(WriteVarint(buf.data(), b.value), b.size);
    uint64_t v = ~0ULL;
    EXPECT_EQ(ReadVarint(buf.data(), buf.data() + buf.size(), &v), b.size) << b.value;
    EXPECT_EQ(v, b.value);
  }
}

// Test vectors from RFC 9000, appendix A.1.
TEST(VarintTest, Rfc9000Vectors) {
  struct Vec {
    std::vector<uint8_t> bytes;
    uint64_t value;
  };
  const Vec vecs[] = {
      {{0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c}, 151288809941952652ULL},
      {{0x9d, 0x7f, 0x3e, 0x7d}, 494878333ULL},
      {{0x7b, 0xbd}, 15293},
      {{0x25}, 37},
  };
  for (const Vec& t : vecs) {
    uint64_t v = 0;
    EXPECT_EQ(ReadVarint(t.bytes.data(), t.bytes.data() + t.bytes.size(), &v), t.bytes.size());
    EXPECT_EQ(v, t.value);
    std::vector<uint8_t> out(t.bytes.size());
    EXPECT_EQ(WriteVarint(out.data(), t.value), t.bytes.size());
    EXPECT_EQ(out, t.bytes);
  }
}

TEST(VarintTest, NonMinimalEncodingIsAccepted) {
  // RFC 9000 A.1: 0x4025 also decodes to 37. The decoder accepts it; the encoder never
  // produces it.
  const uint8_t two[] = {0x40, 0x25};
  uint64_t v = 0;
  EXPECT_EQ(ReadVarint(two, two + 2, &v), 2u);
  EXPECT_EQ(v, 37u);
}

TEST(VarintTest, TruncatedInputAtEveryLength) {
  for (const Boundary& b : kBoundaries) {
    std::vector<uint8_t> full(b.size);
    WriteVarint(full.data(), b.value);
    for (size_t len = 0; len < b.size; ++len) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + len);
      uint64_t v = 12345;
      EXPECT_EQ(ReadVarint(cut.data(), cut.data() + cut.size(), &v), 0u)
          << "value " << b.value << " cut to " << len;
      EXPECT_EQ(v, 12345u) << "output written on failure";
    }
  }
}

TEST(VarintTest, EmptyAndInvertedRangesReadNothing) {
  const uint8_t one[] = {0x01};
  uint64_t v = 7;
  EXPECT_EQ(ReadVarint(one, one, &v), 0u);
  EXPECT_EQ(ReadVarint(one + 1, one, &v), 0u);
  EXPECT_EQ(v, 7u);
}

TEST(VarintTest, RandomValuesRoundTrip) {
  Rng rng(42);
  for (int i = 0; i < 10000; ++i) {
    // Spread over all four lengths: pick a bit width, then a value of that width.
    int bits = static_cast<int>(rng.UniformInt(63));
    uint64_t v = bits == 0 ? 0 : (rng.Next() >> (64 - bits));
    ASSERT_LE(v, kMaxVarint);
    uint8_t buf[8];
    size_t n = WriteVarint(buf, v);
    ASSERT_EQ(n, VarintSize(v));
    uint64_t back = 0;
    ASSERT_EQ(ReadVarint(buf, buf + n, &back), n);
    ASSERT_EQ(back, v);
    // The length prefix matches the size.
    EXPECT_EQ(size_t{1} << (buf[0] >> 6), n);
  }
}

}  // namespace
}  // namespace longhaul::wire
