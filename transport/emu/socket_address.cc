#include "transport/emu/socket_address.h"

#include <arpa/inet.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace longhaul::emu {

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad address '", text, "': ", why,
                                                   " (expected 127.0.0.1:PORT or [::1]:PORT)"));
  };
  std::string host;
  absl::string_view port_text;
  bool v6 = false;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("missing ']'");
    host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing ':PORT'");
    port_text = text.substr(close + 2);
    v6 = true;
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing ':PORT'");
    host = std::string(text.substr(0, colon));
    if (host.find(':') != std::string::npos) return bad("IPv6 addresses need brackets");
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return bad("port must be a number in 0..65535");
  }
  SocketAddress a;
  if (v6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &s->sin6_addr) != 1) {
      return bad("not a numeric IPv6 address");
    }
    a.len_ = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage_);
    s->sin_family = AF_INET;
    s->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &s->sin_addr) != 1) {
      return bad("not a numeric IPv4 address");
    }
    a.len_ = sizeof(sockaddr_in);
  }
  return a;
}

SocketAddress SocketAddress::FromSockaddr(const sockaddr* sa, socklen_t len) {
  SocketAddress a;
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in));
    a.len_ = sizeof(sockaddr_in);
  } else if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    std::memcpy(&a.storage_, sa, sizeof(sockaddr_in6));
    a.len_ = sizeof(sockaddr_in6);
  }
  return a;
}

absl::StatusOr<SocketAddress> SocketAddress::OfSocket(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", strerror(errno)));
  }
  return FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
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

bool SocketAddress::is_loopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  }
  return false;
}

std::string SocketAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&storage_);
    inet_ntop(AF_INET, &s->sin_addr, buf, sizeof(buf));
    return absl::StrCat(buf, ":", port());
  }
  if (family() == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&storage_);
    inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof(buf));
    return absl::StrCat("[", buf, "]:", port());
  }
  return "";
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&storage_);
    const auto* b = reinterpret_cast<const sockaddr_in*>(&o.storage_);
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
  }
  if (family() == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&storage_);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(&o.storage_);
    return std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(in6_addr)) == 0 &&
           a->sin6_port == b->sin6_port && a->sin6_scope_id == b->sin6_scope_id;
  }
  return true;
}

}  // namespace longhaul::emu
