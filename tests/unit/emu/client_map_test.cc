#include "transport/emu/client_map.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace longhaul::emu {
namespace {

net::SocketAddress Addr(int port) {
  return *net::SocketAddress::Parse(absl::StrCat("127.0.0.1:", port));
}

TEST(ClientMapTest, DistinctPortsAreDistinctClients) {
  ClientMap m(8);
  auto a = m.Insert(Addr(1000), 1);
  auto b = m.Insert(Addr(1001), 2);
  EXPECT_NE(a.index, b.index);
  EXPECT_EQ(m.Find(Addr(1000)), a.index);
  EXPECT_EQ(m.Find(Addr(1001)), b.index);
  EXPECT_FALSE(m.Find(Addr(1002)).has_value());
  EXPECT_FALSE(m.Find(*net::SocketAddress::Parse("127.0.0.2:1000")).has_value());
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.entry(a.index).addr, Addr(1000));
}

TEST(ClientMapTest, FullMapEvictsTheLeastRecentlyUsed) {
  ClientMap m(3);
  auto a = m.Insert(Addr(1), 10);
  auto b = m.Insert(Addr(2), 20);
  auto c = m.Insert(Addr(3), 30);
  m.Touch(a.index, 40);  // 2 is now the least recently used
  const uint32_t gen_b = m.entry(b.index).generation;
  auto d = m.Insert(Addr(4), 50);
  EXPECT_TRUE(d.evicted);
  EXPECT_EQ(d.evicted_addr, Addr(2));
  EXPECT_EQ(d.index, b.index);
  EXPECT_FALSE(m.Find(Addr(2)).has_value());
  EXPECT_EQ(m.Find(Addr(4)), d.index);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.evictions(), 1u);
  // Datagrams queued for the evicted client are recognisable.
  EXPECT_FALSE(m.Valid(b.index, gen_b));
  EXPECT_TRUE(m.Valid(d.index, m.entry(d.index).generation));
  EXPECT_TRUE(m.Valid(c.index, m.entry(c.index).generation));
}

TEST(ClientMapTest, RemoveFreesTheIndexAndInvalidatesIt) {
  ClientMap m(2);
  auto a = m.Insert(Addr(1), 1);
  const uint32_t gen = m.entry(a.index).generation;
  m.Remove(a.index);
  EXPECT_FALSE(m.Valid(a.index, gen));
  EXPECT_FALSE(m.Find(Addr(1)).has_value());
  auto b = m.Insert(Addr(2), 2);
  EXPECT_EQ(b.index, a.index);
  EXPECT_FALSE(b.evicted);
  EXPECT_EQ(m.slots(), 1u);
}

TEST(ClientMapTest, BoundHoldsUnderChurn) {
  ClientMap m(16);
  for (int i = 0; i < 1000; ++i) {
    auto r = m.Insert(Addr(2000 + i), i);
    EXPECT_LT(r.index, 16u);
    EXPECT_EQ(r.evicted, i >= 16);
  }
  EXPECT_EQ(m.size(), 16u);
  EXPECT_EQ(m.slots(), 16u);
  for (int i = 1000 - 16; i < 1000; ++i) EXPECT_TRUE(m.Find(Addr(2000 + i)).has_value());
  EXPECT_EQ(m.evictions(), 1000u - 16u);
}

TEST(ClientMapTest, Ipv6AndIpv4AreDistinctKeys) {
  ClientMap m(4);
  auto a = m.Insert(*net::SocketAddress::Parse("[::1]:5000"), 1);
  auto b = m.Insert(*net::SocketAddress::Parse("127.0.0.1:5000"), 1);
  EXPECT_NE(a.index, b.index);
  EXPECT_EQ(m.Find(*net::SocketAddress::Parse("[::1]:5000")), a.index);
}

}  // namespace
}  // namespace longhaul::emu
