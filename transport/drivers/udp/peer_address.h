// The UDP driver's PeerAddress layout (transport/endpoint/peer_address.h): IPv4 as its 4
// address bytes and 2 port bytes (network order); IPv6 as 16 address bytes, 2 port bytes
// and the 4-byte scope id. Pure functions; thread-safe.
#pragma once

#include <string>

#include "transport/net/socket_address.h"
#include "transport/endpoint/peer_address.h"

namespace longhaul::udp {

endpoint::PeerAddress ToPeerAddress(const net::SocketAddress& a);
// An invalid net::SocketAddress when `p` is not in this layout.
net::SocketAddress FromPeerAddress(const endpoint::PeerAddress& p);
// "127.0.0.1:5201", "[::1]:5201"; the hex bytes when `p` is not in this layout.
std::string FormatPeerAddress(const endpoint::PeerAddress& p);

}  // namespace longhaul::udp
