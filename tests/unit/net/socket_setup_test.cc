// Socket set-up, control messages and errno conversion on real sockets, on 127.0.0.1 only
// (ports chosen by the kernel). Waits are poll() with a bound, never sleeps.
#include "transport/net/socket_setup.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transport/net/control_messages.h"
#include "transport/net/errno_status.h"

namespace longhaul::net {
namespace {

SocketAddress Loopback(uint16_t port) { return *SocketAddress::FromNumeric("127.0.0.1", port); }

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 5000) == 1;
}

// A UDP socket bound to 127.0.0.1 (any port), closed with the object.
struct BoundSocket {
  explicit BoundSocket(const UdpSocketFlags& flags = {}) {
    absl::StatusOr<int> s = OpenUdpSocket(AF_INET, flags);
    EXPECT_TRUE(s.ok()) << s.status();
    fd = s.ok() ? *s : -1;
    EXPECT_TRUE(BindSocket(fd, Loopback(0)).ok());
    absl::StatusOr<SocketAddress> a = LocalAddress(fd);
    EXPECT_TRUE(a.ok()) << a.status();
    if (a.ok()) addr = *a;
  }
  ~BoundSocket() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  SocketAddress addr;
};

// One datagram received with recvmsg into `size` bytes, with room for 128 bytes of control
// messages; msg() is the header recvmsg filled.
class ReceivedDatagram {
 public:
  explicit ReceivedDatagram(size_t size) : data_(size) {
    iov_ = {data_.data(), data_.size()};
    h_.msg_iov = &iov_;
    h_.msg_iovlen = 1;
    h_.msg_control = control_;
    h_.msg_controllen = sizeof(control_);
  }
  ReceivedDatagram(const ReceivedDatagram&) = delete;
  ReceivedDatagram& operator=(const ReceivedDatagram&) = delete;

  // recvmsg on `fd`: its result.
  ssize_t Receive(int fd) { return recvmsg(fd, &h_, 0); }
  const msghdr& msg() const { return h_; }

 private:
  std::vector<char> data_;
  alignas(cmsghdr) uint8_t control_[128];
  iovec iov_{};
  msghdr h_{};
};

TEST(SocketSetupTest, OpensNonBlockingCloseOnExecSockets) {
  BoundSocket s;
  ASSERT_GE(s.fd, 0);
  EXPECT_TRUE(s.addr.is_loopback());
  EXPECT_NE(s.addr.port(), 0);
  char buf[8];
  EXPECT_LT(recv(s.fd, buf, sizeof(buf), 0), 0);  // would block instead of waiting
  EXPECT_EQ(errno, EAGAIN);
  absl::StatusOr<int> v6 = OpenUdpSocket(AF_INET6);
  ASSERT_TRUE(v6.ok()) << v6.status();
  close(*v6);
}

TEST(SocketSetupTest, OtherFamiliesAreRefused) {
  absl::StatusOr<int> s = OpenUdpSocket(AF_UNIX);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
}

TEST(SocketSetupTest, BindErrorsNameTheAddressAndTheCause) {
  BoundSocket first;
  absl::StatusOr<int> second = OpenUdpSocket(AF_INET);
  ASSERT_TRUE(second.ok());
  absl::Status st = BindSocket(*second, first.addr);
  EXPECT_TRUE(absl::IsAlreadyExists(st)) << st;
  EXPECT_EQ(st.message(),
            absl::StrCat("cannot bind UDP ", first.addr.ToString(), ": address already in use"));
  // An address this host does not have (the benchmarking range; nothing is sent).
  st = BindSocket(*second, *SocketAddress::Parse("198.18.255.254:0"));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_NE(st.message().find("cannot bind UDP 198.18.255.254:0"), std::string::npos) << st;
  close(*second);
  const int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(tcp, 0);
  ASSERT_TRUE(BindSocket(tcp, Loopback(0)).ok());
  st = BindSocket(tcp, Loopback(0));  // already bound
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot bind TCP 127.0.0.1:0"), std::string::npos) << st;
  close(tcp);
}

TEST(SocketSetupTest, ConnectFixesThePeer) {
  BoundSocket server;
  BoundSocket client;
  ASSERT_TRUE(ConnectSocket(client.fd, server.addr).ok());
  ASSERT_EQ(send(client.fd, "x", 1, 0), 1);
  ASSERT_TRUE(Readable(server.fd));
  sockaddr_storage from{};
  socklen_t len = sizeof(from);
  char c = 0;
  ASSERT_EQ(recvfrom(server.fd, &c, 1, 0, reinterpret_cast<sockaddr*>(&from), &len), 1);
  EXPECT_EQ(SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&from), len), client.addr);
  absl::Status st = ConnectSocket(client.fd, *SocketAddress::Parse("[::1]:9"));  // wrong family
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot connect UDP socket to [::1]:9"), std::string::npos) << st;
}

size_t ReadSysctl(const char* path) {
  std::ifstream f(path);
  size_t v = 0;
  f >> v;
  return v;
}

TEST(SocketSetupTest, BuffersReportWhatTheKernelGranted) {
  BoundSocket s;
  const size_t rmem_max = ReadSysctl("/proc/sys/net/core/rmem_max");
  const size_t wmem_max = ReadSysctl("/proc/sys/net/core/wmem_max");
  // Within the plain limits: granted as asked, with or without FORCE.
  const size_t small = 64 * 1024;
  SocketBuffers b = SetSocketBuffers(s.fd, small, /*force=*/false);
  EXPECT_EQ(b.requested, small);
  EXPECT_EQ(b.rcvbuf, small);
  EXPECT_EQ(b.sndbuf, small);
  EXPECT_FALSE(b.forced);
  EXPECT_FALSE(b.capped());
  // Above them without FORCE: capped at the sysctl limits.
  const size_t big = 2 * std::max(rmem_max, wmem_max) + (1 << 20);
  b = SetSocketBuffers(s.fd, big, /*force=*/false);
  EXPECT_TRUE(b.capped());
  EXPECT_EQ(b.rcvbuf, rmem_max);
  EXPECT_EQ(b.sndbuf, wmem_max);
  // With FORCE: granted in full where permitted (CAP_NET_ADMIN), else capped as above.
  b = SetSocketBuffers(s.fd, big);
  EXPECT_EQ(b.capped(), !b.forced);
  const BufferGrant g = SetSocketBuffer(s.fd, BufferKind::kReceive, big);
  EXPECT_EQ(g.requested, big);
  EXPECT_EQ(g.usable(), g.kernel_bytes / 2);
  EXPECT_EQ(g.capped(), !g.forced);
  if (g.forced) {
    EXPECT_EQ(g.usable(), big);
  }
}

TEST(SocketSetupTest, EcnTosAndArrivalTimeReachTheReceiver) {
  UdpSocketFlags flags;
  flags.rx_timestamps = true;
  BoundSocket rx(flags);
  BoundSocket tx;
  for (uint8_t tos : {uint8_t{2}, uint8_t{1}, uint8_t{3}, uint8_t{0}, uint8_t{0xb8 | 2}}) {
    char payload[100] = {static_cast<char>(tos)};
    iovec iov{payload, sizeof(payload)};
    alignas(cmsghdr) uint8_t control[kTosControlBytes];
    msghdr h{};
    h.msg_name = const_cast<sockaddr*>(rx.addr.sockaddr_ptr());
    h.msg_namelen = rx.addr.sockaddr_len();
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = WriteTosControl(AF_INET, tos, control);
    ASSERT_EQ(sendmsg(tx.fd, &h, 0), 100) << std::strerror(errno);
    ASSERT_TRUE(Readable(rx.fd));
    ReceivedDatagram got(200);
    ASSERT_EQ(got.Receive(rx.fd), 100);
    const msghdr& r = got.msg();
    const ReceivedControl c = ParseReceivedControl(r);
    EXPECT_EQ(c.tos, tos);
    EXPECT_EQ(ReceivedTos(r), tos);
    EXPECT_GT(c.realtime_ns, 0);
    EXPECT_EQ(ReceivedRealtimeNs(r), c.realtime_ns);
    EXPECT_EQ(c.gro_segment, 0u);
    EXPECT_FALSE(c.has_drop_counter);
  }
  EXPECT_EQ(SocketDrops(rx.fd), 0u);
}

TEST(SocketSetupTest, WithoutTheOptionsNothingIsAttached) {
  UdpSocketFlags flags;
  flags.recv_ecn = false;
  BoundSocket rx(flags);
  BoundSocket tx;
  ASSERT_TRUE(ConnectSocket(tx.fd, rx.addr).ok());
  ASSERT_EQ(send(tx.fd, "abc", 3, 0), 3);
  ASSERT_TRUE(Readable(rx.fd));
  ReceivedDatagram got(8);
  ASSERT_EQ(got.Receive(rx.fd), 3);
  const msghdr& r = got.msg();
  EXPECT_EQ(r.msg_controllen, 0u);
  const ReceivedControl c = ParseReceivedControl(r);
  EXPECT_EQ(c.realtime_ns, -1);
  EXPECT_EQ(c.tos, 0);
}

TEST(SocketSetupTest, DropsAreCountedWhereTheyHappen) {
  UdpSocketFlags flags;
  flags.rx_drop_counter = true;
  BoundSocket rx(flags);
  SetSocketBuffer(rx.fd, BufferKind::kReceive, 0, /*force=*/false);  // the kernel's minimum
  flags.pmtu_probe = true;
  BoundSocket tx(flags);
  ASSERT_TRUE(ConnectSocket(tx.fd, rx.addr).ok());
  EXPECT_GE(PathMtu(tx.fd), 1280);  // loopback's MTU
  const std::string payload(1000, 'x');
  for (int i = 0; i < 64; ++i) ASSERT_EQ(send(tx.fd, payload.data(), payload.size(), 0), 1000);
  ASSERT_TRUE(Readable(rx.fd));
  const uint64_t drops = SocketDrops(rx.fd);
  EXPECT_GT(drops, 0u);  // far more than a minimum buffer holds
  // Each datagram carries the drop count of when it was queued: the ones queued before
  // the buffer filled carry none, one queued after the drops carries their number.
  char got[1000];
  while (recv(rx.fd, got, sizeof(got), 0) > 0) {
  }
  ASSERT_EQ(send(tx.fd, payload.data(), payload.size(), 0), 1000);
  ASSERT_TRUE(Readable(rx.fd));
  ReceivedDatagram last(sizeof(got));
  ASSERT_EQ(last.Receive(rx.fd), 1000);
  const ReceivedControl c = ParseReceivedControl(last.msg());
  ASSERT_TRUE(c.has_drop_counter);
  EXPECT_EQ(c.drop_counter, drops);
}

TEST(SocketSetupTest, OffloadsAreProbedNotAssumed) {
  BoundSocket s;
  // Both exist on any kernel this builds for (4.18+); what matters is that the probe
  // answers without changing how the socket sends.
  EXPECT_TRUE(ProbeGso(s.fd));
  EXPECT_TRUE(EnableGro(s.fd));
  const int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_FALSE(ProbeGso(tcp));
  EXPECT_FALSE(EnableGro(tcp));
  close(tcp);
}

TEST(ControlMessagesTest, WritersLayOutMessagesTheParserReads) {
  alignas(cmsghdr) uint8_t control[kTosControlBytes + kSegmentControlBytes];
  size_t used = WriteSegmentControl(1400, control);
  used += WriteTosControl(AF_INET6, 3, control + used);
  ASSERT_LE(used, sizeof(control));
  msghdr h{};
  h.msg_control = control;
  h.msg_controllen = used;
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->cmsg_level, SOL_UDP);
  uint16_t seg = 0;
  std::memcpy(&seg, CMSG_DATA(c), sizeof(seg));
  EXPECT_EQ(seg, 1400);
  c = CMSG_NXTHDR(&h, c);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->cmsg_level, IPPROTO_IPV6);
  EXPECT_EQ(c->cmsg_type, IPV6_TCLASS);
  EXPECT_EQ(ParseReceivedControl(h).tos, 3);
  EXPECT_EQ(CMSG_NXTHDR(&h, c), nullptr);
}

TEST(ErrnoStatusTest, CodesFollowWhatTheCallerCanDo) {
  EXPECT_EQ(ErrnoCode(EADDRINUSE), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoCode(EACCES), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoCode(EADDRNOTAVAIL), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoCode(EMSGSIZE), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoCode(EMFILE), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoCode(EBADF), absl::StatusCode::kInternal);
  EXPECT_EQ(ErrnoCode(ECONNREFUSED), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoCode(ENETUNREACH), absl::StatusCode::kUnavailable);
  const absl::Status s = ErrnoStatus(EADDRINUSE, "cannot bind UDP 1.2.3.4:5");
  EXPECT_EQ(s.message(), "cannot bind UDP 1.2.3.4:5: address already in use");
}

TEST(ErrnoStatusTest, DatagramErrorsAreUnavailableExceptTooLarge) {
  const SocketAddress to = Loopback(5201);
  absl::Status s = SendErrorStatus(ECONNREFUSED, 100, to);
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_EQ(s.message(), "connection refused by 127.0.0.1:5201: nothing listens on that UDP port");
  s = SendErrorStatus(EMSGSIZE, 9000, to);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("datagram of 9000 bytes is too large"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsUnavailable(SendErrorStatus(ENOBUFS, 1, to)));
  EXPECT_TRUE(absl::IsUnavailable(SendErrorStatus(EPERM, 1, to)));  // a firewall's drop
  EXPECT_NE(SendErrorStatus(EPERM, 1, SocketAddress()).message().find("the peer"),
            std::string::npos);
  s = ReceiveErrorStatus(ECONNREFUSED, to);
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_NE(s.message().find("refused by 127.0.0.1:5201"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsUnavailable(ReceiveErrorStatus(ENOMEM, to)));
}

}  // namespace
}  // namespace longhaul::net
