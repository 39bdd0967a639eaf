#include "transport/net/socket_address.h"

#include <arpa/inet.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::net {
namespace {

constexpr absl::string_view kHostPortForm = "expected HOST:PORT, e.g. 127.0.0.1:5201 or [::1]:5201";
constexpr absl::string_view kNumericForm = "expected 127.0.0.1:PORT or [::1]:PORT";

absl::Status BadAddress(absl::string_view text, absl::string_view why, absl::string_view form) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad address '", text, "': ", why, " (", form, ")"));
}

// Splits as SplitHostPort does; `bracketed` tells whether HOST was written "[...]".
absl::Status Split(absl::string_view text, absl::string_view form, HostPort* out, bool* bracketed) {
  absl::string_view host;
  absl::string_view port_text;
  *bracketed = !text.empty() && text[0] == '[';
  if (*bracketed) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return BadAddress(text, "missing ']'", form);
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      return BadAddress(text, "missing ':PORT'", form);
    }
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return BadAddress(text, "missing ':PORT'", form);
    host = text.substr(0, colon);
    if (host.find(':') != absl::string_view::npos) {
      return BadAddress(text, "IPv6 addresses need brackets", form);
    }
    port_text = text.substr(colon + 1);
  }
  if (host.empty()) return BadAddress(text, "missing host", form);
  uint32_t port = 0;
  bool digits = !port_text.empty() && port_text.size() <= 5;
  for (char c : port_text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) digits = false;
    if (digits) port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!digits || port > 65535) return BadAddress(text, "port must be a number in 0..65535", form);
  out->host = std::string(host);
  out->port = static_cast<uint16_t>(port);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HostPort> SplitHostPort(absl::string_view text) {
  HostPort hp;
  bool bracketed = false;
  LH_RETURN_IF_ERROR(Split(text, kHostPortForm, &hp, &bracketed));
  return hp;
}

absl::StatusOr<SocketAddress> SocketAddress::Parse(absl::string_view text) {
  HostPort hp;
  bool bracketed = false;
  LH_RETURN_IF_ERROR(Split(text, kNumericForm, &hp, &bracketed));
  SocketAddress a;
  if (bracketed) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    if (inet_pton(AF_INET6, hp.host.c_str(), &s->sin6_addr) != 1) {
      return BadAddress(text, "not a numeric IPv6 address", kNumericForm);
    }
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(hp.port);
    a.len_ = sizeof(sockaddr_in6);
  } else {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage_);
    if (inet_pton(AF_INET, hp.host.c_str(), &s->sin_addr) != 1) {
      return BadAddress(text, "not a numeric IPv4 address", kNumericForm);
    }
    s->sin_family = AF_INET;
    s->sin_port = htons(hp.port);
    a.len_ = sizeof(sockaddr_in);
  }
  return a;
}

absl::StatusOr<SocketAddress> SocketAddress::FromNumeric(absl::string_view ip, uint16_t port) {
  std::string text(ip);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage_);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.len_ = sizeof(sockaddr_in);
    return a;
  }
  std::memset(&a.storage_, 0, sizeof(a.storage_));
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
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

bool SocketAddress::is_loopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  }
  return false;
}

uint32_t SocketAddress::scope_id() const {
  if (family() != AF_INET6) return 0;
  return reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_scope_id;
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

size_t SocketAddress::Identity(uint8_t out[kMaxIdentityBytes]) const {
  if (family() == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage_);
    std::memcpy(out, &v4->sin_addr, 4);
    std::memcpy(out + 4, &v4->sin_port, 2);
    return 6;
  }
  if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    std::memcpy(out, &v6->sin6_addr, 16);
    std::memcpy(out + 16, &v6->sin6_port, 2);
    return 18;
  }
  return 0;
}

bool SocketAddress::operator==(const SocketAddress& o) const {
  if (family() != o.family() || scope_id() != o.scope_id()) return false;
  uint8_t a[kMaxIdentityBytes], b[kMaxIdentityBytes];
  const size_t na = Identity(a), nb = o.Identity(b);
  return na == nb && std::memcmp(a, b, na) == 0;
}

}  // namespace longhaul::net
