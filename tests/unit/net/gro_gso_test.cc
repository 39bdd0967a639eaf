#include <vector>

#include "gtest/gtest.h"
#include "transport/net/gro.h"
#include "transport/net/udp_socket.h"

namespace longhaul::net {
namespace {

TEST(GroSplit, CoalescedBufferSplitsIntoSegmentsWithShortLast) {
  GroSegments s(8270 * 7 + 100, 8270);
  ASSERT_EQ(s.count(), 8u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(s[i].offset, i * 8270);
    EXPECT_EQ(s[i].length, 8270u);
  }
  EXPECT_EQ(s[7].offset, 7u * 8270);
  EXPECT_EQ(s[7].length, 100u);
}

TEST(GroSplit, ExactMultipleAndSingleDatagram) {
  GroSegments exact(3000, 1000);
  ASSERT_EQ(exact.count(), 3u);
  EXPECT_EQ(exact[2].length, 1000u);
  GroSegments none(1500, 0);  // no UDP_GRO control message
  ASSERT_EQ(none.count(), 1u);
  EXPECT_EQ(none[0].length, 1500u);
  GroSegments bigger(500, 1000);  // gso_size larger than the buffer: one datagram
  ASSERT_EQ(bigger.count(), 1u);
  EXPECT_EQ(bigger[0].length, 500u);
  EXPECT_EQ(GroSegments(0, 1000).count(), 0u);
}

TEST(GroSplit, SegmentsCoverTheBufferExactly) {
  for (size_t len : {1u, 7u, 999u, 1000u, 1001u, 65535u}) {
    for (size_t seg : {0u, 1u, 3u, 1000u, 8270u}) {
      GroSegments s(len, seg);
      size_t total = 0;
      for (size_t i = 0; i < s.count(); ++i) {
        EXPECT_EQ(s[i].offset, total);
        EXPECT_GT(s[i].length, 0u);
        total += s[i].length;
      }
      EXPECT_EQ(total, len) << len << "/" << seg;
    }
  }
}

std::vector<TxDatagram> Datagrams(const std::vector<uint32_t>& lens, const SocketAddress* dest,
                                  Ecn ecn = Ecn::kEct0) {
  static uint8_t buf[65536];
  std::vector<TxDatagram> d;
  for (uint32_t l : lens) d.push_back(TxDatagram{buf, l, ecn, dest});
  return d;
}

// The datagram count of each group.
std::vector<size_t> Counts(const std::vector<GsoGroup>& g) {
  std::vector<size_t> n;
  for (const GsoGroup& x : g) n.push_back(x.count);
  return n;
}

TEST(GsoPlan, EqualSizesGroupShortLastEndsGroup) {
  std::vector<TxDatagram> d = Datagrams({1000, 1000, 1000, 500, 1000, 1000}, nullptr);
  std::vector<GsoGroup> g;
  PlanGsoGroups(d, 64, 65507, &g);
  ASSERT_EQ(Counts(g), (std::vector<size_t>{4, 2}));
  EXPECT_EQ(g[0].first, 0u);
  EXPECT_EQ(g[0].segment, 1000u);
  EXPECT_EQ(g[1].first, 4u);
}

TEST(GsoPlan, LargerDatagramStartsANewGroup) {
  std::vector<TxDatagram> d = Datagrams({500, 1000, 1000}, nullptr);
  std::vector<GsoGroup> g;
  PlanGsoGroups(d, 64, 65507, &g);
  EXPECT_EQ(Counts(g), (std::vector<size_t>{1, 2}));
}

TEST(GsoPlan, LimitsSegmentsAndBytes) {
  std::vector<TxDatagram> d = Datagrams(std::vector<uint32_t>(20, 8270), nullptr);
  std::vector<GsoGroup> g;
  PlanGsoGroups(d, 64, 65507, &g);  // 7 x 8270 = 57890 fits, 8 do not
  EXPECT_EQ(Counts(g), (std::vector<size_t>{7, 7, 6}));
  std::vector<TxDatagram> small = Datagrams(std::vector<uint32_t>(10, 100), nullptr);
  PlanGsoGroups(small, 4, 65507, &g);
  EXPECT_EQ(Counts(g), (std::vector<size_t>{4, 4, 2}));
  PlanGsoGroups(small, 1, 65507, &g);  // GSO off
  EXPECT_EQ(g.size(), 10u);
}

TEST(GsoPlan, DestinationAndEcnSplitGroups) {
  absl::StatusOr<SocketAddress> a = SocketAddress::FromNumeric("127.0.0.1", 1000);
  absl::StatusOr<SocketAddress> a2 = SocketAddress::FromNumeric("127.0.0.1", 1000);
  absl::StatusOr<SocketAddress> b = SocketAddress::FromNumeric("127.0.0.1", 1001);
  std::vector<TxDatagram> d = Datagrams({100, 100}, &*a);
  std::vector<TxDatagram> d2 = Datagrams({100}, &*a2);  // equal address, other object
  std::vector<TxDatagram> d3 = Datagrams({100}, &*b);
  std::vector<TxDatagram> d4 = Datagrams({100}, &*b, Ecn::kNotEct);
  d.insert(d.end(), d2.begin(), d2.end());
  d.insert(d.end(), d3.begin(), d3.end());
  d.insert(d.end(), d4.begin(), d4.end());
  std::vector<GsoGroup> g;
  PlanGsoGroups(d, 64, 65507, &g);
  EXPECT_EQ(Counts(g), (std::vector<size_t>{3, 1, 1}));
}

}  // namespace
}  // namespace longhaul::net
