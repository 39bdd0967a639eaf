#include "transport/wire/crc32c.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul::wire {
namespace {

// Bitwise reference CRC32C (reflected polynomial 0x82F63B78).
uint32_t ReferenceCrc32c(const uint8_t* data, size_t len) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < len; ++i) {
    crc ^= data[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

TEST(Crc32cTest, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
}

TEST(Crc32cTest, EmptyInput) { EXPECT_EQ(Crc32c(nullptr, 0), 0u); }

// RFC 3720 (iSCSI) appendix B.4 test vectors.
TEST(Crc32cTest, IscsiVectors) {
  std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesReferenceAtManyLengthsAndAlignments) {
  Rng rng(7);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng.Next());
  const size_t lengths[] = {1,  2,   3,   7,   8,    15,   16,   31,   63,   64,
                            65, 127, 255, 256, 1023, 1500, 4096, 9000, 65507};
  for (size_t len : lengths) {
    for (size_t align = 0; align < 8; ++align) {
      // Copy into an exactly sized buffer so reads past the end are caught.
      std::vector<uint8_t> exact(buf.begin() + align, buf.begin() + align + len);
      ASSERT_EQ(Crc32c(exact.data(), exact.size()), ReferenceCrc32c(exact.data(), len))
          << "len " << len << " align " << align;
    }
  }
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::vector<uint8_t> data(200);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  const uint32_t good = Crc32c(data.data(), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      data[i] ^= static_cast<uint8_t>(1 << b);
      EXPECT_NE(Crc32c(data.data(), data.size()), good) << i << ":" << b;
      data[i] ^= static_cast<uint8_t>(1 << b);
    }
  }
}

}  // namespace
}  // namespace longhaul::wire
