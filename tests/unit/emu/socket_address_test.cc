#include "transport/emu/socket_address.h"

#include "gtest/gtest.h"

namespace longhaul::emu {
namespace {

TEST(SocketAddressTest, ParsesAndFormats) {
  absl::StatusOr<SocketAddress> a = SocketAddress::Parse("127.0.0.1:5201");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 5201);
  EXPECT_TRUE(a->is_loopback());
  EXPECT_EQ(a->ToString(), "127.0.0.1:5201");
  absl::StatusOr<SocketAddress> b = SocketAddress::Parse("[::1]:0");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->family(), AF_INET6);
  EXPECT_EQ(b->ToString(), "[::1]:0");
  EXPECT_TRUE(b->is_loopback());
  EXPECT_FALSE(SocketAddress::Parse("198.18.0.1:1")->is_loopback());
}

TEST(SocketAddressTest, ErrorsNameTheProblem) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:x",
                          "localhost:80", "::1:80", "[::1]80", "[::1", "1.2.3:4", "[zz]:1"}) {
    absl::StatusOr<SocketAddress> a = SocketAddress::Parse(bad);
    EXPECT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("bad address"), std::string::npos) << a.status();
  }
}

TEST(SocketAddressTest, EqualityAndPort) {
  SocketAddress a = *SocketAddress::Parse("127.0.0.1:1");
  SocketAddress b = *SocketAddress::Parse("127.0.0.1:2");
  EXPECT_NE(a, b);
  b.set_port(1);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(SocketAddress().empty());
  EXPECT_EQ(SocketAddress().ToString(), "");
}

}  // namespace
}  // namespace longhaul::emu
