// The verbs driver's peer addresses (GID + QPN) and the GRH parser that recovers a
// sender's GID from the 40 bytes in front of a UD message.
#include "transport/drivers/verbs/peer_address.h"

#include <arpa/inet.h>

#include <cstring>

#include "gtest/gtest.h"
#include "transport/drivers/verbs/queue_pair.h"

namespace longhaul::verbs {
namespace {

TEST(PeerAddress, RoundTripsAndFormats) {
  UdAddress a;
  a.gid = Ipv4MappedGid(inet_addr("198.18.1.2"));
  a.qpn = 0x123456;
  std::optional<UdAddress> back = FromPeerAddress(ToPeerAddress(a));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->gid, a.gid);
  EXPECT_EQ(back->qpn, a.qpn);
  EXPECT_EQ(FormatPeerAddress(ToPeerAddress(a)), "198.18.1.2 qp 1193046");
  uint32_t v4 = 0;
  ASSERT_TRUE(GidToIpv4(a.gid, &v4));
  EXPECT_EQ(v4, inet_addr("198.18.1.2"));
  Gid link_local{};
  link_local[0] = 0xfe;
  link_local[1] = 0x80;
  link_local[15] = 1;
  EXPECT_FALSE(GidToIpv4(link_local, &v4));
}

TEST(SourceGid, FromAnIpv4HeaderOrAGrh) {
  // RoCE v2 over IPv4: 20 unused bytes, then the IPv4 header (source at offset 12).
  uint8_t grh[kGrhBytes] = {};
  grh[20] = 0x45;
  const uint32_t src = inet_addr("198.18.1.1");
  std::memcpy(grh + 20 + 12, &src, 4);
  Gid g{};
  ASSERT_TRUE(SourceGid(grh, &g));
  EXPECT_EQ(g, Ipv4MappedGid(src));
  // An IPv6 GRH: the source GID at offset 8.
  uint8_t v6[kGrhBytes] = {};
  v6[0] = 0x60;
  for (int i = 0; i < 16; ++i) v6[8 + i] = static_cast<uint8_t>(0xA0 + i);
  ASSERT_TRUE(SourceGid(v6, &g));
  EXPECT_EQ(g[0], 0xA0);
  EXPECT_EQ(g[15], 0xAF);
  // Neither.
  uint8_t junk[kGrhBytes] = {};
  EXPECT_FALSE(SourceGid(junk, &g));
}

TEST(WrId, CarriesQueuePairAndSlot) {
  const uint64_t id = WrId(7, 4095);
  EXPECT_EQ(WrQp(id), 7u);
  EXPECT_EQ(WrSlot(id), 4095u);
}

}  // namespace
}  // namespace longhaul::verbs
