#include "transport/drivers/verbs/peer_address.h"

#include <arpa/inet.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace longhaul::verbs {

endpoint::PeerAddress ToPeerAddress(const UdAddress& a) {
  uint8_t b[20];
  std::memcpy(b, a.gid.data(), 16);
  const uint32_t qpn = htonl(a.qpn);
  std::memcpy(b + 16, &qpn, 4);
  return endpoint::PeerAddress(std::span<const uint8_t>(b, sizeof(b)));
}

std::optional<UdAddress> FromPeerAddress(const endpoint::PeerAddress& p) {
  std::span<const uint8_t> b = p.bytes();
  if (b.size() != 20) return std::nullopt;
  UdAddress a;
  std::memcpy(a.gid.data(), b.data(), 16);
  uint32_t qpn;
  std::memcpy(&qpn, b.data() + 16, 4);
  a.qpn = ntohl(qpn);
  return a;
}

Gid Ipv4MappedGid(uint32_t ipv4) {
  Gid g{};
  g[10] = 0xff;
  g[11] = 0xff;
  std::memcpy(g.data() + 12, &ipv4, 4);
  return g;
}

bool GidToIpv4(const Gid& g, uint32_t* ipv4) {
  for (int i = 0; i < 10; ++i) {
    if (g[i] != 0) return false;
  }
  if (g[10] != 0xff || g[11] != 0xff) return false;
  std::memcpy(ipv4, g.data() + 12, 4);
  return true;
}

std::string FormatGid(const Gid& g) {
  char text[INET6_ADDRSTRLEN] = {0};
  uint32_t v4;
  if (GidToIpv4(g, &v4)) {
    inet_ntop(AF_INET, &v4, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, g.data(), text, sizeof(text));
  }
  return text;
}

std::string FormatPeerAddress(const endpoint::PeerAddress& p) {
  std::optional<UdAddress> a = FromPeerAddress(p);
  if (!a) return endpoint::HexAddress(p);
  return absl::StrCat(FormatGid(a->gid), " qp ", a->qpn);
}

}  // namespace longhaul::verbs
