#include "transport/net/resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "transport/base/status.h"

namespace longhaul::net {

absl::StatusOr<SocketAddress> Resolve(absl::string_view host, uint16_t port) {
  absl::StatusOr<SocketAddress> numeric = SocketAddress::FromNumeric(host, port);
  if (numeric.ok()) return numeric;
  const std::string name(host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    if (res != nullptr) freeaddrinfo(res);
    return absl::NotFoundError(absl::StrCat("cannot resolve host '", host,
                                            "': ", rc != 0 ? gai_strerror(rc) : "no address"));
  }
  SocketAddress chosen;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    SocketAddress s = SocketAddress::FromSockaddr(a->ai_addr, a->ai_addrlen);
    if (!s.valid()) continue;
    if (!chosen.valid() || (chosen.family() != AF_INET && s.family() == AF_INET)) chosen = s;
  }
  freeaddrinfo(res);
  if (!chosen.valid()) {
    return absl::NotFoundError(absl::StrCat("host '", host, "' has no IPv4 or IPv6 address"));
  }
  chosen.set_port(port);
  return chosen;
}

absl::StatusOr<SocketAddress> ResolveHostPort(absl::string_view host_port) {
  LH_ASSIGN_OR_RETURN(HostPort hp, SplitHostPort(host_port));
  return Resolve(hp.host, hp.port);
}

}  // namespace longhaul::net
