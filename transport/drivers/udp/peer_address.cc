#include "transport/drivers/udp/peer_address.h"

#include <netinet/in.h>

#include <cstring>

namespace longhaul::udp {

endpoint::PeerAddress ToPeerAddress(const net::SocketAddress& a) {
  uint8_t b[22];
  size_t n = a.Identity(b);
  if (a.family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a.sockaddr_ptr());
    std::memcpy(b + n, &v6->sin6_scope_id, 4);
    n += 4;
  }
  return endpoint::PeerAddress(std::span<const uint8_t>(b, n));
}

net::SocketAddress FromPeerAddress(const endpoint::PeerAddress& p) {
  std::span<const uint8_t> b = p.bytes();
  net::SocketAddress out;
  if (b.size() == 6) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    std::memcpy(&v4.sin_addr, b.data(), 4);
    std::memcpy(&v4.sin_port, b.data() + 4, 2);
    out = net::SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&v4), sizeof(v4));
  } else if (b.size() == 22) {
    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    std::memcpy(&v6.sin6_addr, b.data(), 16);
    std::memcpy(&v6.sin6_port, b.data() + 16, 2);
    std::memcpy(&v6.sin6_scope_id, b.data() + 18, 4);
    out = net::SocketAddress::FromSockaddr(reinterpret_cast<const sockaddr*>(&v6), sizeof(v6));
  }
  return out;
}

std::string FormatPeerAddress(const endpoint::PeerAddress& p) {
  net::SocketAddress a = FromPeerAddress(p);
  return a.valid() ? a.ToString() : endpoint::HexAddress(p);
}

}  // namespace longhaul::udp
