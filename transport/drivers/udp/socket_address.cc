#include "transport/drivers/udp/socket_address.h"

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"

namespace longhaul::udp {

absl::StatusOr<SocketAddress> SocketAddress::FromNumeric(absl::string_view ip, uint16_t port) {
  SocketAddress a;
  std::string text(ip);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len_ = sizeof(sockaddr_in);
    return a;
  }
  std::memset(&a.storage_, 0, sizeof(a.storage_));
  if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.len_ = sizeof(sockaddr_in6);
    return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", ip, "' is not a numeric IPv4 or IPv6 address"));
}

SocketAddress SocketAddress::FromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in));
    a.len_ = sizeof(sockaddr_in);
  } else if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in6));
    a.len_ = sizeof(sockaddr_in6);
  }
  return a;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SocketAddress::IpString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf,
              sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf,
              sizeof(buf));
  } else {
    return "(none)";
  }
  return buf;
}

std::string SocketAddress::ToString() const {
  if (family() == AF_INET6) return absl::StrCat("[", IpString(), "]:", port());
  if (family() == AF_INET) return absl::StrCat(IpString(), ":", port());
  return "(none)";
}

size_t SocketAddress::Identity(uint8_t out[18]) const {
  size_t n = 0;
  if (family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage_);
    std::memcpy(out, &v4->sin_addr, 4);
    std::memcpy(out + 4, &v4->sin_port, 2);
    n = 6;
  } else if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    std::memcpy(out, &v6->sin6_addr, 16);
    std::memcpy(out + 16, &v6->sin6_port, 2);
    n = 18;
  }
  return n;
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family()) return false;
  uint8_t a[18], b[18];
  size_t na = Identity(a), nb = o.Identity(b);
  return na == nb && std::memcmp(a, b, na) == 0;
}

}  // namespace longhaul::udp
