// The emulator's UDP relay run in-process (testing::LoopbackRelay) on 127.0.0.1: a
// datagram crosses both ways with its ECN mark, and after Cut() (UdpRelay::ChangeLink
// with loss=1) the next one is dropped by the model. Waits are poll() with a bound.
#include "transport/testing/loopback_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "transport/net/control_messages.h"
#include "transport/net/socket_setup.h"

namespace longhaul::testing {
namespace {

// A UDP socket bound to 127.0.0.1 (any port) that reads TOS bytes.
struct Socket {
  Socket() {
    absl::StatusOr<int> s = net::OpenUdpSocket(AF_INET);
    EXPECT_TRUE(s.ok()) << s.status();
    fd = s.ok() ? *s : -1;
    EXPECT_TRUE(net::BindSocket(fd, *net::SocketAddress::Parse("127.0.0.1:0")).ok());
    addr = *net::LocalAddress(fd);
  }
  ~Socket() { close(fd); }

  void SendTo(const net::SocketAddress& to, const std::string& payload, uint8_t tos) {
    iovec iov{const_cast<char*>(payload.data()), payload.size()};
    alignas(cmsghdr) uint8_t control[net::kTosControlBytes];
    msghdr h{};
    h.msg_name = const_cast<sockaddr*>(to.sockaddr_ptr());
    h.msg_namelen = to.sockaddr_len();
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = net::WriteTosControl(AF_INET, tos, control);
    ASSERT_EQ(sendmsg(fd, &h, 0), static_cast<ssize_t>(payload.size()));
  }

  // The next datagram within 5 s ("" if none), its TOS byte and sender.
  std::string Receive(uint8_t* tos, net::SocketAddress* from) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return "";
    char buf[2048];
    iovec iov{buf, sizeof(buf)};
    sockaddr_storage name{};
    alignas(cmsghdr) uint8_t control[64];
    msghdr h{};
    h.msg_name = &name;
    h.msg_namelen = sizeof(name);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = control;
    h.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(fd, &h, 0);
    if (n < 0) return "";
    *tos = net::ReceivedTos(h);
    *from = net::SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&name), h.msg_namelen);
    return std::string(buf, static_cast<size_t>(n));
  }

  int fd = -1;
  net::SocketAddress addr;
};

TEST(LoopbackRelayTest, RelaysBothWaysUntilCut) {
  Socket server;
  Socket client;
  absl::StatusOr<std::unique_ptr<LoopbackRelay>> relay = LoopbackRelay::Start(server.addr.port());
  ASSERT_TRUE(relay.ok()) << relay.status();
  const net::SocketAddress relay_addr =
      *net::SocketAddress::FromNumeric("127.0.0.1", (*relay)->port());

  client.SendTo(relay_addr, "hello", /*tos=*/2);  // ECT(0)
  uint8_t tos = 0;
  net::SocketAddress upstream;
  ASSERT_EQ(server.Receive(&tos, &upstream), "hello");
  EXPECT_EQ(tos & 3, 2);
  EXPECT_NE(upstream, client.addr);  // the relay's upstream socket for this client
  server.SendTo(upstream, "answer", /*tos=*/1);
  net::SocketAddress from;
  ASSERT_EQ(client.Receive(&tos, &from), "answer");
  EXPECT_EQ(tos & 3, 1);
  EXPECT_EQ(from, relay_addr);

  (*relay)->Cut();
  client.SendTo(relay_addr, "lost", 0);
  absl::StatusOr<emu::EmuStats> st = (*relay)->Stop();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->forward.own.received, 2u);
  EXPECT_EQ(st->forward.model.delivered, 1u);
  EXPECT_EQ(st->forward.model.dropped_loss, 1u);
  EXPECT_EQ(st->reverse.model.delivered, 1u);
  EXPECT_EQ(st->clients_created, 1u);
  EXPECT_EQ(st->OwnDrops(), 0u);
  EXPECT_TRUE((*relay)->Stop().ok());  // a second Stop() returns the same
}

TEST(LoopbackRelayTest, ChangeLinkRefusesAZeroRate) {
  Socket server;
  absl::StatusOr<std::unique_ptr<emu::UdpRelay>> direct = [&] {
    emu::UdpRelayOptions o;
    o.link = LoopbackRelay::CleanLink();
    o.listen = *net::SocketAddress::Parse("127.0.0.1:0");
    o.forward = server.addr;
    return emu::UdpRelay::Create(o);
  }();
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_TRUE(absl::IsInvalidArgument((*direct)->ChangeLink(sim::LinkSpec())));
  EXPECT_TRUE((*direct)->ChangeLink(LoopbackRelay::CleanLink()).ok());
}

}  // namespace
}  // namespace longhaul::testing
