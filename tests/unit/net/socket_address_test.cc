#include "transport/net/socket_address.h"

#include <arpa/inet.h>

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash_testing.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace longhaul::net {
namespace {

TEST(SocketAddressTest, ParsesAndFormatsIpv4AndIpv6) {
  absl::StatusOr<SocketAddress> a = SocketAddress::Parse("127.0.0.1:5201");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->family(), AF_INET);
  EXPECT_EQ(a->port(), 5201);
  EXPECT_EQ(a->sockaddr_len(), sizeof(sockaddr_in));
  EXPECT_TRUE(a->is_loopback());
  EXPECT_EQ(a->ToString(), "127.0.0.1:5201");
  EXPECT_EQ(a->IpString(), "127.0.0.1");
  absl::StatusOr<SocketAddress> b = SocketAddress::Parse("[::1]:0");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->family(), AF_INET6);
  EXPECT_EQ(b->sockaddr_len(), sizeof(sockaddr_in6));
  EXPECT_EQ(b->ToString(), "[::1]:0");
  EXPECT_TRUE(b->is_loopback());
  EXPECT_FALSE(SocketAddress::Parse("198.18.0.1:1")->is_loopback());
  EXPECT_FALSE(SocketAddress::Parse("[2001:db8::1]:1")->is_loopback());
}

TEST(SocketAddressTest, PrintThenParseGivesTheSameAddress) {
  for (const char* text : {"0.0.0.0:0", "127.0.0.1:1", "198.18.0.2:65535", "[::]:9", "[::1]:5201",
                           "[2001:db8::42]:443", "[fe80::1]:7", "[::ffff:127.0.0.1]:80"}) {
    absl::StatusOr<SocketAddress> a = SocketAddress::Parse(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status();
    EXPECT_EQ(a->ToString(), text);
    absl::StatusOr<SocketAddress> again = SocketAddress::Parse(a->ToString());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *a);
  }
}

TEST(SocketAddressTest, ParseErrorsNameTheTextAndTheProblem) {
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c :
       {Case{"", "missing ':PORT'"}, Case{"127.0.0.1", "missing ':PORT'"},
        Case{"127.0.0.1:", "port must be"}, Case{"127.0.0.1:70000", "port must be"},
        Case{"127.0.0.1:x", "port must be"}, Case{"127.0.0.1:+80", "port must be"},
        Case{"127.0.0.1:123456", "port must be"}, Case{"localhost:80", "not a numeric IPv4"},
        Case{"::1:80", "need brackets"}, Case{"[::1]80", "missing ':PORT'"},
        Case{"[::1", "missing ']'"}, Case{"1.2.3:4", "not a numeric IPv4"},
        Case{"[zz]:1", "not a numeric IPv6"}, Case{"[127.0.0.1]:1", "not a numeric IPv6"},
        Case{":80", "missing host"}, Case{"[]:80", "missing host"}}) {
    absl::StatusOr<SocketAddress> a = SocketAddress::Parse(c.text);
    ASSERT_FALSE(a.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(a.status())) << a.status();
    const std::string m(a.status().message());
    EXPECT_NE(m.find(absl::StrCat("bad address '", c.text, "'")), std::string::npos) << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << m;
  }
}

TEST(SocketAddressTest, FromNumericTakesBareAndBracketedAddresses) {
  absl::StatusOr<SocketAddress> a = SocketAddress::FromNumeric("127.0.0.1", 80);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ToString(), "127.0.0.1:80");
  absl::StatusOr<SocketAddress> b = SocketAddress::FromNumeric("::1", 80);
  absl::StatusOr<SocketAddress> c = SocketAddress::FromNumeric("[::1]", 80);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*b, *c);
  EXPECT_EQ(b->ToString(), "[::1]:80");
  for (const char* bad : {"", "localhost", "1.2.3", "[::1", "::1]", "256.0.0.1"}) {
    absl::StatusOr<SocketAddress> x = SocketAddress::FromNumeric(bad, 1);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(x.status()));
    EXPECT_NE(x.status().message().find(absl::StrCat("'", bad, "'")), std::string::npos)
        << x.status();
  }
}

TEST(SocketAddressTest, FromSockaddrNeedsACompleteAddress) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(9);
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto* sa = reinterpret_cast<const sockaddr*>(&v4);
  EXPECT_EQ(SocketAddress::FromSockaddr(sa, sizeof(v4)).ToString(), "127.0.0.1:9");
  EXPECT_FALSE(SocketAddress::FromSockaddr(sa, sizeof(v4) - 1).valid());
  EXPECT_FALSE(SocketAddress::FromSockaddr(nullptr, 0).valid());
  sockaddr other{};
  other.sa_family = AF_UNIX;
  EXPECT_FALSE(SocketAddress::FromSockaddr(&other, sizeof(other)).valid());
}

TEST(SocketAddressTest, InvalidAddress) {
  SocketAddress none;
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none.family(), AF_UNSPEC);
  EXPECT_EQ(none.port(), 0);
  none.set_port(5);
  EXPECT_EQ(none.port(), 0);
  EXPECT_EQ(none.ToString(), "(none)");
  uint8_t id[SocketAddress::kMaxIdentityBytes];
  EXPECT_EQ(none.Identity(id), 0u);
  EXPECT_EQ(none, SocketAddress());
  EXPECT_NE(none, *SocketAddress::Parse("0.0.0.0:0"));
}

TEST(SocketAddressTest, EqualityCoversFamilyAddressPortAndScope) {
  SocketAddress a = *SocketAddress::Parse("127.0.0.1:1");
  SocketAddress b = *SocketAddress::Parse("127.0.0.1:2");
  EXPECT_NE(a, b);
  b.set_port(1);
  EXPECT_EQ(a, b);
  EXPECT_NE(*SocketAddress::Parse("127.0.0.1:1"), *SocketAddress::Parse("127.0.0.2:1"));
  EXPECT_NE(*SocketAddress::Parse("[::ffff:127.0.0.1]:1"), a);  // other family
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(7);
  inet_pton(AF_INET6, "fe80::1", &s.sin6_addr);
  s.sin6_scope_id = 2;
  const SocketAddress scoped =
      SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&s), sizeof(s));
  EXPECT_NE(scoped, *SocketAddress::Parse("[fe80::1]:7"));  // scope 0
  s.sin6_flowinfo = 99;                                     // not part of the identity
  EXPECT_EQ(scoped, SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&s), sizeof(s)));
}

TEST(SocketAddressTest, IdentityIsAddressThenPortInNetworkOrder) {
  uint8_t id[SocketAddress::kMaxIdentityBytes];
  ASSERT_EQ(SocketAddress::Parse("198.18.0.2:258")->Identity(id), 6u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(id), 6),
            std::string("\xc6\x12\x00\x02\x01\x02", 6));
  ASSERT_EQ(SocketAddress::Parse("[::1]:1")->Identity(id), 18u);
  EXPECT_EQ(id[15], 1);
  EXPECT_EQ(id[16], 0);
  EXPECT_EQ(id[17], 1);
}

TEST(SocketAddressTest, HashesConsistentlyWithEquality) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fe80::1", &s.sin6_addr);
  s.sin6_scope_id = 3;
  EXPECT_TRUE(absl::VerifyTypeImplementsAbslHashCorrectly({
      SocketAddress(),
      *SocketAddress::Parse("127.0.0.1:1"),
      *SocketAddress::Parse("127.0.0.1:2"),
      *SocketAddress::Parse("127.0.0.2:1"),
      *SocketAddress::Parse("[::1]:1"),
      *SocketAddress::Parse("[::ffff:127.0.0.1]:1"),
      *SocketAddress::Parse("[fe80::1]:0"),
      SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&s), sizeof(s)),
  }));
  absl::flat_hash_set<SocketAddress> set;
  for (int port = 0; port < 100; ++port) {
    set.insert(*SocketAddress::Parse(absl::StrCat("127.0.0.1:", port)));
    set.insert(*SocketAddress::Parse(absl::StrCat("[::1]:", port)));
  }
  EXPECT_EQ(set.size(), 200u);
  EXPECT_TRUE(set.contains(*SocketAddress::FromNumeric("::1", 42)));
}

TEST(SplitHostPortTest, NamesAndNumericHosts) {
  absl::StatusOr<HostPort> a = SplitHostPort("localhost:9300");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 9300);
  absl::StatusOr<HostPort> b = SplitHostPort("[::1]:0");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  for (const char* bad : {"localhost", "host:", ":1", "a:b:1", "host:65536", "[::1]"}) {
    absl::StatusOr<HostPort> x = SplitHostPort(bad);
    ASSERT_FALSE(x.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(x.status()));
    EXPECT_NE(x.status().message().find("expected HOST:PORT"), std::string::npos) << x.status();
  }
}

}  // namespace
}  // namespace longhaul::net
