#include "transport/emu/ip_packet.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace longhaul::emu {
namespace {

std::vector<uint8_t> Ipv4(uint8_t tos, uint8_t ttl) {
  std::vector<uint8_t> p(28, 0);
  p[0] = 0x45;
  p[1] = tos;
  p[3] = 28;
  p[8] = ttl;
  p[9] = 17;
  p[12] = 198, p[13] = 18, p[14] = 0, p[15] = 1;
  p[16] = 198, p[17] = 18, p[18] = 0, p[19] = 2;
  const uint16_t c = InternetChecksum(p.data(), 20);
  p[10] = static_cast<uint8_t>(c >> 8);
  p[11] = static_cast<uint8_t>(c);
  return p;
}

TEST(IpPacketTest, ChecksumOfAValidHeaderIsZero) {
  std::vector<uint8_t> p = Ipv4(0, 64);
  EXPECT_EQ(InternetChecksum(p.data(), 20), 0);
}

TEST(IpPacketTest, Ipv4CeKeepsTheChecksumValidForManyHeaders) {
  // Vary the header so the incremental update meets carries and the 0x0000/0xffff edge.
  for (int tos = 0; tos < 256; ++tos) {
    for (int ttl = 0; ttl < 256; ttl += 5) {
      std::vector<uint8_t> p = Ipv4(static_cast<uint8_t>(tos), static_cast<uint8_t>(ttl));
      const uint8_t ecn = tos & 3;
      const bool set = SetIpPacketCe(p.data(), p.size());
      ASSERT_EQ(set, ecn != kEcnNotEct) << tos;
      ASSERT_EQ(IpPacketEcn(p.data(), p.size()), ecn == kEcnNotEct ? kEcnNotEct : kEcnCe);
      ASSERT_EQ(p[1] & 0xfc, tos & 0xfc) << "DSCP changed";
      ASSERT_EQ(InternetChecksum(p.data(), 20), 0) << "tos " << tos << " ttl " << ttl;
    }
  }
}

TEST(IpPacketTest, Ipv6TrafficClass) {
  std::vector<uint8_t> p(40, 0);
  p[0] = 0x6b;  // version 6, traffic class high nibble 0xb
  p[1] = 0x90;  // traffic class low nibble 0x9: DSCP bits ..10, ECN 01 (ECT(1))
  EXPECT_EQ(IpPacketEcn(p.data(), p.size()), kEcnEct1);
  EXPECT_TRUE(SetIpPacketCe(p.data(), p.size()));
  EXPECT_EQ(IpPacketEcn(p.data(), p.size()), kEcnCe);
  EXPECT_EQ(p[0], 0x6b);
  EXPECT_EQ(p[1], 0xb0);
}

TEST(IpPacketTest, MalformedPacketsAreLeftAlone) {
  std::vector<uint8_t> p = Ipv4(2, 64);
  std::vector<uint8_t> copy = p;
  EXPECT_FALSE(SetIpPacketCe(p.data(), 19));  // truncated header
  p[0] = 0x44;                                // IHL 4 < 5
  EXPECT_FALSE(SetIpPacketCe(p.data(), p.size()));
  p[0] = 0x4f;  // IHL 15 = 60 bytes > 28
  EXPECT_FALSE(SetIpPacketCe(p.data(), p.size()));
  p[0] = 0x55;  // version 5
  EXPECT_FALSE(SetIpPacketCe(p.data(), p.size()));
  EXPECT_EQ(IpPacketEcn(p.data(), p.size()), kEcnNotEct);
  EXPECT_FALSE(SetIpPacketCe(nullptr, 0));
  std::vector<uint8_t> v6(39, 0x60);
  EXPECT_FALSE(SetIpPacketCe(v6.data(), v6.size()));
  p[0] = 0x45;
  EXPECT_EQ(p, copy);
}

}  // namespace
}  // namespace longhaul::emu
