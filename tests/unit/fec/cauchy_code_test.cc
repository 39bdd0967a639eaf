#include "transport/fec/cauchy_code.h"

#include <isa-l/erasure_code.h>

#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fec_shards.h"
#include "transport/base/rng.h"

namespace longhaul::fec {
namespace {

TEST(CauchyCodeTest, ValidateGeometry) {
  EXPECT_TRUE(ValidateGeometry(1, 1).ok());
  EXPECT_TRUE(ValidateGeometry(32, 4).ok());
  EXPECT_TRUE(ValidateGeometry(250, 5).ok());
  EXPECT_TRUE(ValidateGeometry(1, 254).ok());
  EXPECT_FALSE(ValidateGeometry(0, 4).ok());
  EXPECT_FALSE(ValidateGeometry(4, 0).ok());
  EXPECT_FALSE(ValidateGeometry(250, 6).ok());
  EXPECT_FALSE(ValidateGeometry(-1, 3).ok());
}

TEST(CauchyCodeTest, RoundUpToShardAlignment) {
  EXPECT_EQ(RoundUpToShardAlignment(0), 0u);
  EXPECT_EQ(RoundUpToShardAlignment(1), 64u);
  EXPECT_EQ(RoundUpToShardAlignment(64), 64u);
  EXPECT_EQ(RoundUpToShardAlignment(8234), 8256u);
}

TEST(CauchyCodeTest, CoefficientsAreNonZeroAndIndependentOfGeometry) {
  // Every (r, j) with r + j < 255 is a valid coefficient, and a smaller geometry's
  // matrix is the top-left corner of a larger one (shortening and extra parity rows).
  std::vector<uint8_t> small(8 * 2), big(16 * 4);
  ParityMatrix(8, 2, small.data());
  ParityMatrix(16, 4, big.data());
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 8; ++j) EXPECT_EQ(small[r * 8 + j], big[r * 16 + j]);
  }
  for (int r = 0; r < 255; ++r) {
    for (int j = 0; r + j < 255; ++j) ASSERT_NE(ParityCoefficient(r, j), 0) << r << "," << j;
  }
}

TEST(CauchyCodeTest, SameFamilyAsIsalCauchyGenerator) {
  // gf_gen_cauchy1_matrix(a, 255, k) puts 1/(i ^ j) in row i >= k; our parity row r is
  // its row 255 - r.
  for (int k : {4, 32, 100}) {
    std::vector<uint8_t> a(255 * k);
    gf_gen_cauchy1_matrix(a.data(), 255, k);
    for (int r = 1; r <= 255 - k; ++r) {
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(ParityCoefficient(r, j), a[(255 - r) * k + j]) << "k=" << k << " r=" << r;
      }
    }
  }
}

TEST(CauchyCodeTest, FastDecodeMatrixEqualsFullInversion) {
  Rng rng(7);
  for (int k : {1, 2, 5, 16, 32, 100, 200}) {
    const int max_m = std::min(16, 255 - k);
    for (int trial = 0; trial < 40; ++trial) {
      const int e = 1 + static_cast<int>(rng.UniformInt(std::min(k, max_m)));
      const std::vector<bool> lost_mask = testing::RandomPattern(rng, k, e);
      const std::vector<bool> row_mask = testing::RandomPattern(rng, max_m, e);
      std::vector<uint8_t> lost, rows;
      for (int j = 0; j < k; ++j) {
        if (lost_mask[j]) lost.push_back(static_cast<uint8_t>(j));
      }
      for (int r = 0; r < max_m; ++r) {
        if (row_mask[r]) rows.push_back(static_cast<uint8_t>(r));
      }
      std::vector<uint8_t> fast(e * k, 0xAA), full(e * k, 0x55);
      ASSERT_TRUE(DecodeMatrix(k, lost, rows, fast.data()).ok());
      ASSERT_TRUE(DecodeMatrixByFullInversion(k, lost, rows, full.data()).ok());
      ASSERT_EQ(fast, full) << "k=" << k << " e=" << e;
    }
  }
}

TEST(CauchyCodeTest, DecodeMatrixRejectsMalformedIndexLists) {
  std::vector<uint8_t> out(64 * 4);
  const std::vector<uint8_t> two_rows = {0, 1};
  EXPECT_FALSE(DecodeMatrix(8, std::vector<uint8_t>{3}, two_rows, out.data()).ok());     // sizes
  EXPECT_FALSE(DecodeMatrix(8, std::vector<uint8_t>{3, 3}, two_rows, out.data()).ok());  // dup
  EXPECT_FALSE(DecodeMatrix(8, std::vector<uint8_t>{5, 3}, two_rows, out.data()).ok());  // order
  EXPECT_FALSE(DecodeMatrix(8, std::vector<uint8_t>{3, 8}, two_rows, out.data()).ok());  // >= k
  EXPECT_FALSE(
      DecodeMatrix(250, std::vector<uint8_t>{1}, std::vector<uint8_t>{5}, out.data()).ok());
  EXPECT_FALSE(DecodeMatrix(0, std::vector<uint8_t>{}, std::vector<uint8_t>{}, out.data()).ok());
  EXPECT_TRUE(DecodeMatrix(250, std::vector<uint8_t>{1}, std::vector<uint8_t>{4}, out.data()).ok());
}

}  // namespace
}  // namespace longhaul::fec
