#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "transport/endpoint/handshake.h"
#include "transport/endpoint/siphash.h"

namespace longhaul::endpoint {
namespace {

// Test vectors of the SipHash paper (appendix A): key 00..0f, messages 00..(n-1).
TEST(SipHash, PaperVectors) {
  SipKey key{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
  std::vector<uint8_t> msg(15);
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(SipHash24(key, msg.data(), 15), 0xa129ca6149be45e5ULL);
  EXPECT_EQ(SipHash24(key, msg.data(), 0), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(SipHash24(key, msg.data(), 1), 0x74f839c593dc67fdULL);
  EXPECT_EQ(SipHash24(key, msg.data(), 8), 0x93f5f5799a932462ULL);
}

// The UDP driver's layout (family, address, port); the cookie binds whatever bytes the
// driver chose.
PeerAddress Addr(const char* ip, uint16_t port) {
  uint8_t b[1 + 16 + 2];
  size_t n = 0;
  in6_addr v6;
  in_addr v4;
  if (inet_pton(AF_INET, ip, &v4) == 1) {
    b[n++] = 4;
    std::memcpy(b + n, &v4, 4);
    n += 4;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, ip, &v6), 1) << ip;
    b[n++] = 6;
    std::memcpy(b + n, &v6, 16);
    n += 16;
  }
  b[n++] = static_cast<uint8_t>(port >> 8);
  b[n++] = static_cast<uint8_t>(port);
  return PeerAddress(std::span<const uint8_t>(b, n));
}

TEST(Cookie, ValidForTheSameClientWithinTheLifetime) {
  CookieMinter m(SipKey{1, 2}, Duration::Seconds(10));
  const PeerAddress a = Addr("127.0.0.1", 40000);
  const Time t0 = Time::FromNanoseconds(int64_t{5000} * 1000000000);
  std::vector<uint8_t> c = m.Mint(t0, a, 77, kProtocolVersion);
  ASSERT_EQ(c.size(), kCookieSize);
  EXPECT_EQ(m.Check(t0, c, a, 77, kProtocolVersion), CookieVerdict::kValid);
  EXPECT_EQ(m.Check(t0 + Duration::Seconds(9), c, a, 77, kProtocolVersion), CookieVerdict::kValid);
  EXPECT_EQ(m.Check(t0 + Duration::Seconds(11), c, a, 77, kProtocolVersion),
            CookieVerdict::kExpired);
}

TEST(Cookie, BoundToAddressPortIdVersionAndSecret) {
  CookieMinter m(SipKey{1, 2}, Duration::Seconds(10));
  const PeerAddress a = Addr("127.0.0.1", 40000);
  const Time t0 = Time::FromNanoseconds(int64_t{1} << 40);
  std::vector<uint8_t> c = m.Mint(t0, a, 77, kProtocolVersion);
  EXPECT_EQ(m.Check(t0, c, Addr("127.0.0.2", 40000), 77, 1), CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, c, Addr("127.0.0.1", 40001), 77, 1), CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, c, a, 78, kProtocolVersion), CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, c, a, 77, kProtocolVersion + 1), CookieVerdict::kInvalid);
  CookieMinter other(SipKey{1, 3}, Duration::Seconds(10));
  EXPECT_EQ(other.Check(t0, c, a, 77, kProtocolVersion), CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, c, Addr("::1", 40000), 77, kProtocolVersion), CookieVerdict::kInvalid);
}

TEST(Cookie, ForgedAndTamperedCookiesAreInvalid) {
  CookieMinter m(SipKey{0x0123456789abcdefULL, 0xfedcba9876543210ULL}, Duration::Seconds(10));
  const PeerAddress a = Addr("127.0.0.1", 40000);
  const Time t0 = Time::FromNanoseconds(int64_t{1} << 40);
  std::vector<uint8_t> c = m.Mint(t0, a, 5, kProtocolVersion);
  for (size_t i = 0; i < c.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> t = c;
      t[i] ^= static_cast<uint8_t>(1 << bit);
      EXPECT_NE(m.Check(t0, t, a, 5, kProtocolVersion), CookieVerdict::kValid)
          << "byte " << i << " bit " << bit;
    }
  }
  // Moving the timestamp forward (to extend the lifetime) breaks the MAC.
  std::vector<uint8_t> later = c;
  later[8] += 1;
  EXPECT_EQ(m.Check(t0, later, a, 5, kProtocolVersion), CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, std::vector<uint8_t>(kCookieSize, 0), a, 5, kProtocolVersion),
            CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, std::vector<uint8_t>(3, 1), a, 5, kProtocolVersion),
            CookieVerdict::kInvalid);
  EXPECT_EQ(m.Check(t0, {}, a, 5, kProtocolVersion), CookieVerdict::kInvalid);
}

TEST(Cookie, FromTheFutureIsInvalid) {
  CookieMinter m(SipKey{9, 9}, Duration::Seconds(10));
  const PeerAddress a = Addr("127.0.0.1", 1);
  const Time t0 = Time::FromNanoseconds(int64_t{1} << 40);
  std::vector<uint8_t> c = m.Mint(t0 + Duration::Seconds(60), a, 5, kProtocolVersion);
  EXPECT_EQ(m.Check(t0, c, a, 5, kProtocolVersion), CookieVerdict::kInvalid);
}

}  // namespace
}  // namespace longhaul::endpoint
