#include "tests/support/udp_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace longhaul::testing {

SilentUdpSocket::SilentUdpSocket() {
  fd_ = socket(AF_INET, SOCK_DGRAM, 0);
  EXPECT_GE(fd_, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
  port_ = ntohs(a.sin_port);
}

SilentUdpSocket::~SilentUdpSocket() {
  if (fd_ >= 0) close(fd_);
}

uint16_t UnusedUdpPort() { return SilentUdpSocket().port(); }

}  // namespace longhaul::testing
