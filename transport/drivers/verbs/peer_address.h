// The verbs driver's PeerAddress layout (transport/endpoint/peer_address.h): the peer's
// 16-byte GID followed by its 4-byte UD queue pair number (network order). Every queue
// pair of the driver uses one Q_Key (kQkey), so it is not part of the address. Pure
// functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "transport/endpoint/peer_address.h"

namespace longhaul::verbs {

using Gid = std::array<uint8_t, 16>;

// The Q_Key of every longhaul UD queue pair ("LH" and a version).
inline constexpr uint32_t kQkey = 0x4C480001;

struct UdAddress {
  Gid gid{};
  uint32_t qpn = 0;
};

endpoint::PeerAddress ToPeerAddress(const UdAddress& a);
// nullopt when `p` is not in this layout.
std::optional<UdAddress> FromPeerAddress(const endpoint::PeerAddress& p);
// "198.18.1.1 qp 17" for an IPv4-mapped GID, "fe80::1 qp 17" otherwise; the hex bytes
// when `p` is not in this layout.
std::string FormatPeerAddress(const endpoint::PeerAddress& p);

// The IPv4-mapped GID of a RoCE v2 address (::ffff:a.b.c.d); `ipv4` in network order.
Gid Ipv4MappedGid(uint32_t ipv4);
// True when `g` is IPv4-mapped; `*ipv4` (network order) then holds the address.
bool GidToIpv4(const Gid& g, uint32_t* ipv4);
std::string FormatGid(const Gid& g);

}  // namespace longhaul::verbs
