#include "transport/net/resolver.h"

#include <string>

#include "gtest/gtest.h"

namespace longhaul::net {
namespace {

TEST(ResolverTest, NumericAddressesNeedNoLookup) {
  absl::StatusOr<SocketAddress> a = Resolve("127.0.0.1", 5201);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ToString(), "127.0.0.1:5201");
  absl::StatusOr<SocketAddress> b = Resolve("::1", 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ToString(), "[::1]:1");
  absl::StatusOr<SocketAddress> c = Resolve("[::1]", 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, *b);
}

TEST(ResolverTest, LocalhostResolvesToIpv4Loopback) {
  absl::StatusOr<SocketAddress> a = Resolve("localhost", 9300);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->family(), AF_INET);  // IPv4 first
  EXPECT_TRUE(a->is_loopback());
  EXPECT_EQ(a->port(), 9300);
}

TEST(ResolverTest, UnknownHostIsNotFoundNamingTheHost) {
  absl::StatusOr<SocketAddress> a = Resolve("no-such-host.invalid", 1);
  ASSERT_FALSE(a.ok());
  EXPECT_TRUE(absl::IsNotFound(a.status())) << a.status();
  EXPECT_NE(a.status().message().find("'no-such-host.invalid'"), std::string::npos) << a.status();
}

TEST(ResolverTest, HostPortForms) {
  absl::StatusOr<SocketAddress> a = ResolveHostPort("localhost:0");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->is_loopback());
  EXPECT_EQ(a->port(), 0);
  absl::StatusOr<SocketAddress> b = ResolveHostPort("[::1]:9");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ToString(), "[::1]:9");
  absl::StatusOr<SocketAddress> bad = ResolveHostPort("localhost");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  absl::StatusOr<SocketAddress> unknown = ResolveHostPort("no-such-host.invalid:80");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
}

}  // namespace
}  // namespace longhaul::net
