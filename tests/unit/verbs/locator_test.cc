// The verbs driver's locator: the LOCATE codec, and the listener's UDP socket on
// 127.0.0.1 returning datagrams whole (a tuner probe is as large as the path MTU:
// 9000 bytes and more) with kernel arrival times. Waits are poll() with a bound.
#include "transport/drivers/verbs/locator.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/clock.h"

namespace longhaul::verbs {
namespace {

net::SocketAddress Loopback(uint16_t port) {
  return *net::SocketAddress::FromNumeric("127.0.0.1", port);
}

TEST(LocateCodec, RequestAndAnswerRoundTrip) {
  const std::vector<uint8_t> req = EncodeLocateRequest(0x1122334455667788u);
  ASSERT_EQ(req.size(), kLocateSize);
  EXPECT_EQ(DecodeLocateRequest(req), 0x1122334455667788u);
  EXPECT_TRUE(IsLocateMessage(req));
  LocateAnswer a;
  a.address.gid = Ipv4MappedGid(htonl(0xC6120101));  // 198.18.1.1
  a.address.qpn = 17;
  a.qkey = kQkey;
  a.mtu = 4096;
  const std::vector<uint8_t> ans = EncodeLocateAnswer(42, a);
  ASSERT_EQ(ans.size(), kLocateSize);
  std::optional<LocateAnswer> back = DecodeLocateAnswer(ans, 42);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->address.gid, a.address.gid);
  EXPECT_EQ(back->address.qpn, 17u);
  EXPECT_EQ(back->qkey, kQkey);
  EXPECT_EQ(back->mtu, 4096u);
  // Another nonce, a request for an answer, a truncated message: not answers.
  EXPECT_FALSE(DecodeLocateAnswer(ans, 43).has_value());
  EXPECT_FALSE(DecodeLocateAnswer(req, 0x1122334455667788u).has_value());
  EXPECT_FALSE(DecodeLocateRequest(ans).has_value());
  EXPECT_FALSE(DecodeLocateRequest(std::span<const uint8_t>(req.data(), 47)).has_value());
  // A longhaul datagram (first byte 0x01) or a tuner probe (0xB7) is not a locator message.
  EXPECT_FALSE(IsLocateMessage(std::vector<uint8_t>{0x01, 'H', 'V', 'L'}));
  EXPECT_FALSE(IsLocateMessage(std::vector<uint8_t>{0xB7, 0, 0, 0}));
}

TEST(LocateCodec, AnswerWithAnImpossibleQueuePairIsRefused) {
  LocateAnswer a;
  a.address.qpn = 0;
  EXPECT_FALSE(DecodeLocateAnswer(EncodeLocateAnswer(1, a), 1).has_value());
  a.address.qpn = 0x1000000;  // QPNs have 24 bits
  EXPECT_FALSE(DecodeLocateAnswer(EncodeLocateAnswer(1, a), 1).has_value());
}

bool WaitReadable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 5000) == 1;
}

TEST(LocatorSocket, ReturnsLargeDatagramsWholeWithArrivalTimes) {
  absl::StatusOr<std::unique_ptr<LocatorSocket>> l = LocatorSocket::Open(Loopback(0), true);
  ASSERT_TRUE(l.ok()) << l.status();
  const net::SocketAddress to = Loopback((*l)->local().port());
  const int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(tx, 0);
  // A LOCATE request, a 9000-byte-MTU probe (8972 bytes) and the largest UDP payload.
  for (size_t size : {kLocateSize, size_t{8972}, size_t{65507}}) {
    std::vector<uint8_t> d(size);
    for (size_t i = 0; i < size; ++i) d[i] = static_cast<uint8_t>(i * 7 + size);
    const int64_t before = RealtimeNs();
    ASSERT_EQ(sendto(tx, d.data(), d.size(), 0, to.sockaddr_ptr(), to.sockaddr_len()),
              static_cast<ssize_t>(size));
    ASSERT_TRUE(WaitReadable((*l)->fd())) << size;
    LocatorDatagram got;
    ASSERT_TRUE((*l)->Read(&got)) << size;
    EXPECT_EQ(std::vector<uint8_t>(got.data.begin(), got.data.end()), d) << size;
    EXPECT_EQ(got.from.ToString().rfind("127.0.0.1:", 0), 0u) << got.from.ToString();
    EXPECT_GE(got.kernel_time_ns, before - 1'000'000'000) << size;
    EXPECT_FALSE((*l)->Read(&got));
  }
  EXPECT_EQ((*l)->truncated(), 0u);
  close(tx);
}

TEST(LocatorSocket, SendsRepliesAndRefusesABusyPort) {
  absl::StatusOr<std::unique_ptr<LocatorSocket>> a = LocatorSocket::Open(Loopback(0), false);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<LocatorSocket>> b = LocatorSocket::Open(Loopback(0), false);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<uint8_t> req = EncodeLocateRequest(7);
  ASSERT_TRUE((*a)->Send(req, (*b)->local()).ok());
  ASSERT_TRUE(WaitReadable((*b)->fd()));
  LocatorDatagram got;
  ASSERT_TRUE((*b)->Read(&got));
  EXPECT_EQ(DecodeLocateRequest(got.data), 7u);
  EXPECT_EQ(got.from.port(), (*a)->local().port());
  EXPECT_EQ(got.kernel_time_ns, 0);  // timestamps off
  absl::StatusOr<std::unique_ptr<LocatorSocket>> again = LocatorSocket::Open((*a)->local(), false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("address already in use"), std::string::npos)
      << again.status();
}

TEST(SourceAddress, TowardsLoopbackIsLoopback) {
  EXPECT_EQ(SourceAddressTowards(Loopback(9)), htonl(0x7F000001));
}

}  // namespace
}  // namespace longhaul::verbs
